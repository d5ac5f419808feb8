import { Hono } from 'hono'
import { AppError } from '../../errors.js'
import type { Metrics } from '../../metrics.js'
import type { AppEnv } from '../env.js'

/** SPEC §1: liveness, readiness (every store answers) and Prometheus metrics, all without a token. */
export function healthRoutes({ metrics, checks }: { metrics: Metrics; checks: Record<string, () => Promise<void>> }) {
  const app = new Hono<AppEnv>()
  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  app.get('/readyz', async (c) => {
    const results = await Promise.all(Object.entries(checks).map(async ([name, check]) => {
      try {
        await check()
        return [name, 'ok'] as const
      } catch {
        return [name, 'unreachable'] as const
      }
    }))
    const failing = results.filter(([, state]) => state !== 'ok').map(([name]) => name)
    if (failing.length) throw new AppError('not_ready', `Not ready: ${failing.join(', ')} unreachable.`, { checks: Object.fromEntries(results) })
    return c.json({ status: 'ready', checks: Object.fromEntries(results) })
  })
  app.get('/metrics', async (c) => c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }))
  return app
}
