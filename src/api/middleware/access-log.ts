import type { MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import { routePath } from 'hono/route'
import type { Metrics } from '../../metrics.js'
import type { AppEnv } from '../env.js'

/** One structured log line and one metrics sample per request; never the body or the headers. */
export function accessLog({ metrics, logger }: { metrics: Metrics; logger: Logger }): MiddlewareHandler<AppEnv> {
  return async function accessLogMiddleware(c, next) {
    const started = performance.now()
    await next()
    const seconds = (performance.now() - started) / 1_000
    const route = routePath(c, -1) || 'unmatched'
    metrics.httpRequests.inc({ method: c.req.method, route, status: c.res.status })
    metrics.httpDuration.observe({ method: c.req.method, route }, seconds)
    if (logger.isLevelEnabled('info'))
      c.get('log')().info(
        {
          method: c.req.method,
          path: c.req.path,
          route,
          status: c.res.status,
          ms: Math.round(seconds * 10_000) / 10,
          client_id: c.get('principal')?.clientId,
        },
        'request',
      )
  }
}
