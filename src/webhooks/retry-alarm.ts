/**
 * Wakes the dispatcher when a retry it recorded comes due, so a retry is made on time rather
 * than at the next poll (up to `pollIntervalMs` late). Due times are kept sorted and rounded
 * up to `granularityMs`, so a burst of failures (a receiver outage) costs one timer and a
 * short list, not one timer per message. Retries further away than `horizonMs` are left to
 * the poll: being a poll interval late on a 5-minute retry does not matter.
 */
export interface RetryAlarm {
  /** A retry was recorded for `dueAtMs`. */
  add(dueAtMs: number): void
  stop(): void
}

export interface RetryAlarmOptions {
  onDue: () => void
  clock?: () => number
  /** Due times this close together share one wake-up. */
  granularityMs?: number
  horizonMs?: number
}

/** Node timers may fire a millisecond early against `Date.now()`; a claim made too early finds nothing. */
const TIMER_SLACK_MS = 2

export function createRetryAlarm({ onDue, clock = Date.now, granularityMs = 10, horizonMs = 60_000 }: RetryAlarmOptions): RetryAlarm {
  const dueTimes: number[] = [] // ascending, distinct
  let timer: NodeJS.Timeout | undefined
  let stopped = false

  function arm(): void {
    clearTimeout(timer)
    const next = dueTimes[0]
    if (next === undefined || stopped) return
    timer = setTimeout(fire, Math.max(0, next - clock()) + TIMER_SLACK_MS)
    timer.unref()
  }

  function fire(): void {
    const now = clock()
    let due = 0
    while (due < dueTimes.length && dueTimes[due]! <= now) due++
    dueTimes.splice(0, due)
    if (due > 0) onDue()
    arm()
  }

  return {
    add(dueAtMs) {
      if (stopped || dueAtMs - clock() > horizonMs) return
      const at = Math.ceil(dueAtMs / granularityMs) * granularityMs
      let low = 0
      let high = dueTimes.length
      while (low < high) {
        const mid = (low + high) >>> 1
        if (dueTimes[mid]! < at) low = mid + 1
        else high = mid
      }
      if (dueTimes[low] === at) return
      dueTimes.splice(low, 0, at)
      if (low === 0) arm()
    },
    stop() {
      stopped = true
      clearTimeout(timer)
      dueTimes.length = 0
    },
  }
}
