import type { MiddlewareHandler } from 'hono'
import { AppError } from '../../errors.js'
import type { TokenService } from '../../auth/tokens.js'
import type { AppEnv } from '../env.js'

/** RFC 6750 bearer authentication; the verified caller becomes `principal`. */
export function authenticate({ tokens }: { tokens: TokenService }): MiddlewareHandler<AppEnv> {
  return async function authenticateMiddleware(c, next) {
    const header = c.req.header('authorization')
    if (!header) {
      // RFC 6750 §3.1: a request without credentials gets no error code.
      throw new AppError('unauthorized', 'Send an access token: Authorization: Bearer <token>.', {}, { 'WWW-Authenticate': 'Bearer realm="rxtrace"' })
    }
    const match = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(header)
    if (!match) {
      throw new AppError('unauthorized', 'The Authorization header must be "Bearer <token>".', {}, { 'WWW-Authenticate': 'Bearer realm="rxtrace", error="invalid_request"' })
    }
    c.set('principal', await tokens.verify(match[1]!))
    await next()
  }
}

/** 403 unless the token carries `scope` (RFC 6750 §3.1 insufficient_scope). */
export function requireScope(scope: string): MiddlewareHandler<AppEnv> {
  return async function requireScopeMiddleware(c, next) {
    if (!c.get('principal').scopes.has(scope)) {
      throw new AppError('insufficient_scope', `This action needs the "${scope}" scope.`, { required_scope: scope }, {
        'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
      })
    }
    await next()
  }
}
