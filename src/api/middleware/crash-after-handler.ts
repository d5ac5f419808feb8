import type { MiddlewareHandler } from 'hono'
import type { AppEnv } from '../env.js'

/**
 * A crash-test hook (`CRASH_AFTER_HANDLER`): the process dies by SIGKILL once the handler of a
 * matching POST has returned, so whatever the handler committed is kept and the answer is lost,
 * as when a real process dies between its commit and its reply. Innermost in the chain: every
 * other middleware's work after the handler is lost with it. Absent unless configured.
 */
export function crashAfterHandler({ paths }: { paths: RegExp }): MiddlewareHandler<AppEnv> {
  return async function crashAfterHandlerMiddleware(c, next) {
    await next()
    if (c.req.method === 'POST' && paths.test(c.req.path) && c.res.status < 400) process.kill(process.pid, 'SIGKILL')
  }
}
