import { Hono } from 'hono'
import { AppError } from '../../errors.js'
import type { Metrics } from '../../metrics.js'
import type { AppEnv } from '../env.js'

/** A store's probe: resolves when it can serve; may reject with an error carrying a `state` (e.g. `full`). */
export type ReadinessCheck = () => Promise<void>

type Options = {
  metrics: Metrics
  checks: Record<string, ReadinessCheck>
  /** `READY_TIMEOUT_MS`: a probe that has not answered by then counts as `timed_out`. */
  deadlineMs?: number
}

/**
 * Liveness, readiness (every store answers) and Prometheus metrics, all without a token.
 *
 * `/readyz` answers within `deadlineMs` whatever the stores do: a database behind a partition
 * never answers, and a load balancer's probe must not hang on it. A probe still running when the
 * next request comes is shared rather than started again, so a dead store is not probed by a pile
 * of waiting requests.
 */
export function healthRoutes({ metrics, checks, deadlineMs = 800 }: Options) {
  const running = new Map<string, Promise<void>>()
  const probe = (name: string, check: ReadinessCheck): Promise<void> => {
    let pending = running.get(name)
    if (pending === undefined) {
      pending = Promise.resolve()
        .then(check)
        .finally(() => running.delete(name))
      running.set(name, pending)
    }
    return pending
  }
  const stateOf = async (name: string, check: ReadinessCheck): Promise<string> => {
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<string>((resolve) => (timer = setTimeout(resolve, deadlineMs, 'timed_out')))
    try {
      return await Promise.race([
        probe(name, check).then(
          () => 'ok',
          (err: unknown) => String((err as { state?: unknown } | null)?.state ?? 'unreachable'),
        ),
        deadline,
      ])
    } finally {
      clearTimeout(timer)
    }
  }

  const app = new Hono<AppEnv>()
  app.get('/healthz', (c) => c.json({ status: 'ok' }))
  app.get('/readyz', async (c) => {
    const results = await Promise.all(Object.entries(checks).map(async ([name, check]) => [name, await stateOf(name, check)] as const))
    const failing = results.filter(([, state]) => state !== 'ok').map(([name, state]) => `${name} ${state.replace('_', ' ')}`)
    if (failing.length) throw new AppError('not_ready', `Not ready: ${failing.join(', ')}.`, { checks: Object.fromEntries(results) })
    return c.json({ status: 'ready', checks: Object.fromEntries(results) })
  })
  app.get('/metrics', async (c) => c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType }))
  return app
}
