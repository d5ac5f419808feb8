import type { MiddlewareHandler } from 'hono'
import type { Logger } from 'pino'
import type { AppEnv } from '../env.js'
import { newId } from '../../ids.js'

const acceptable = /^[\w.:-]{1,128}$/

/** Gives each request an id (the caller's X-Request-Id when sane), a child logger (made only if it logs), and the API version header. */
export function requestId({ logger }: { logger: Logger }): MiddlewareHandler<AppEnv> {
  return async function requestIdMiddleware(c, next) {
    const offered = c.req.header('x-request-id')
    const id = offered && acceptable.test(offered) ? offered : newId('req')
    c.set('requestId', id)
    let log: Logger | undefined
    c.set('log', () => (log ??= logger.child({ request_id: id })))
    c.header('X-Request-Id', id)
    c.header('API-Version', 'v1') // docs/api.md, Conventions
    await next()
    // A handler that answers with its own Response (the event streams) bypasses c.header(): set them on it.
    if (!c.res.headers.has('API-Version')) {
      c.res.headers.set('X-Request-Id', id)
      c.res.headers.set('API-Version', 'v1')
    }
  }
}
