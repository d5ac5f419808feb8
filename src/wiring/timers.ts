import type { Logger } from 'pino'

/** The service's periodic duties: each runs every `ms`, a failure is logged, and none keeps the process up. */
export class Periodic {
  private readonly timers: NodeJS.Timeout[] = []

  constructor(private readonly logger: Logger) {}

  every(ms: number, task: () => Promise<void> | void, what: string): void {
    const timer = setInterval(
      () =>
        void Promise.resolve()
          .then(task)
          .catch((err) => this.logger.warn({ err }, `${what} failed`)),
      ms,
    )
    timer.unref()
    this.timers.push(timer)
  }

  stop(): void {
    for (const timer of this.timers) clearInterval(timer)
  }
}

/** Settles with `work`, or rejects after `ms` (the work goes on unawaited). */
export function atMost(ms: number, work: Promise<void> | undefined): Promise<void> {
  if (work === undefined) return Promise.resolve()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${ms} ms`)), ms)
    timer.unref()
  })
  return Promise.race([work, late]).finally(() => clearTimeout(timer))
}
