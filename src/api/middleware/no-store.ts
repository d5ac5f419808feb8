import type { MiddlewareHandler } from 'hono'
import type { AppEnv } from '../env.js'

/**
 * `Cache-Control: no-store` (RFC 9111 §5.2.2.5) on every answer of the paths it is mounted on,
 * errors and idempotent replays included: no cache, shared or the client's own, may keep it.
 * Mounted once, on whole path groups rather than route by route, so a route that starts
 * returning a secret cannot forget it. `pragma` adds `Pragma: no-cache` for HTTP/1.0 caches,
 * which the token endpoint must send (RFC 6749 §5.1).
 */
export function noStore({ pragma = false }: { pragma?: boolean } = {}): MiddlewareHandler<AppEnv> {
  return async function noStoreMiddleware(c, next) {
    await next()
    c.res.headers.set('Cache-Control', 'no-store')
    if (pragma) c.res.headers.set('Pragma', 'no-cache')
  }
}
