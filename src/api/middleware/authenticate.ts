import type { MiddlewareHandler } from 'hono'
import { AppError } from '../../errors.js'
import { invalidToken, type TokenService } from '../../auth/tokens.js'
import type { UserDirectory } from '../../auth/users.js'
import type { AppEnv } from '../env.js'
import { callerAddress } from './caller-address.js'
import type { TokenBuckets } from './token-buckets.js'

export type AuthenticateOptions = {
  tokens: TokenService
  /** Who stands behind a user's token (us_…): disabled users' tokens stop working at once. */
  users?: Pick<UserDirectory, 'standingOf'> | undefined
  /** Invalid tokens allowed per caller address; each one costs a signature check (docs/security.md, Resource limits). */
  invalidTokens: TokenBuckets
  trustProxy: boolean
}

/**
 * RFC 6750 bearer authentication; the verified caller becomes `principal`. Each invalid token
 * spends one of its address's allowance; an address that has spent it gets 429 before any
 * signature is checked, except for tokens already verified (they cost nothing to check again).
 * A user's token (`sub` us_…) stops working the moment the user is disabled, and a driver
 * user's token is narrowed to that driver's deliveries.
 */
export function authenticate({ tokens, users, invalidTokens, trustProxy }: AuthenticateOptions): MiddlewareHandler<AppEnv> {
  return async function authenticateMiddleware(c, next) {
    const header = c.req.header('authorization')
    if (!header) {
      // RFC 6750 §3.1: a request without credentials gets no error code.
      throw new AppError(
        'unauthorized',
        'Send an access token: Authorization: Bearer <token>.',
        {},
        { 'WWW-Authenticate': 'Bearer realm="rxtrace"' },
      )
    }
    const match = /^Bearer ([A-Za-z0-9\-._~+/]+=*)$/i.exec(header)
    if (!match) {
      throw new AppError(
        'unauthorized',
        'The Authorization header must be "Bearer <token>".',
        {},
        { 'WWW-Authenticate': 'Bearer realm="rxtrace", error="invalid_request"' },
      )
    }
    const token = match[1]!
    const address = callerAddress(c, trustProxy)
    const waitS = invalidTokens.waitS(address)
    if (waitS > 0 && !tokens.knows(token)) {
      throw new AppError(
        'rate_limited',
        'Too many invalid access tokens from this address; wait before sending another.',
        {},
        { 'Retry-After': String(waitS) },
      )
    }
    let principal
    try {
      principal = await tokens.verify(token)
    } catch (error) {
      if (error instanceof AppError && error.code === 'unauthorized') invalidTokens.take(address)
      throw error
    }
    if (users && principal.sub.startsWith('us_')) {
      const standing = await users.standingOf(principal.sub)
      if (!standing.active) throw invalidToken('The user behind this token is disabled.')
      if (standing.driverId) principal = { ...principal, driverId: standing.driverId }
    }
    c.set('principal', principal)
    await next()
  }
}

/** 403 unless the token carries `scope` (RFC 6750 §3.1 insufficient_scope). */
export function requireScope(scope: string): MiddlewareHandler<AppEnv> {
  return async function requireScopeMiddleware(c, next) {
    if (!c.get('principal').scopes.has(scope)) {
      throw new AppError(
        'insufficient_scope',
        `This action needs the "${scope}" scope.`,
        { required_scope: scope },
        {
          'WWW-Authenticate': `Bearer error="insufficient_scope", scope="${scope}"`,
        },
      )
    }
    await next()
  }
}
