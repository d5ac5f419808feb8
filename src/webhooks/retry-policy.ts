/**
 * When to try a failed webhook again, and when to give up on an endpoint.
 * Pure: time and randomness come in as arguments.
 */

const SECOND = 1_000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

/**
 * Delays after attempts 1‥7, so 8 attempts over ≈ 27.6 h (the Svix schedule, which
 * Standard Webhooks users already know). Attempt 1 is made as soon as the event is committed.
 */
export const DEFAULT_RETRY_SCHEDULE_MS: readonly number[] = [5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 10 * HOUR]

/**
 * ±20 % uniform jitter. Messages that failed together (a receiver outage) would otherwise
 * come back together, hitting the receiver as it recovers; ±20 % spreads a burst over 40 % of
 * the delay while keeping the documented schedule recognisable (5 s → 4–6 s, 10 h → 8–12 h).
 * "Full jitter" (0‥delay) spreads more but could turn the 5-minute retry into an immediate one.
 */
const RETRY_JITTER = 0.2

/** A `Retry-After` beyond this is treated as this: a receiver cannot park a message forever. */
const MAX_RETRY_AFTER_MS = DAY

/** An endpoint failing for 5 days is disabled. */
const DISABLE_AFTER_FAILING_MS = 5 * DAY

const UNIT_MS: Record<string, number> = { ms: 1, s: SECOND, m: MINUTE, h: HOUR, d: DAY }
const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/

/**
 * Parses `WEBHOOK_RETRY_SCHEDULE`, e.g. `1s,2s,500ms,5m,2h`: one delay per retry, in order.
 * Throws a `RangeError` naming the bad entry, fit to print as the start-up error line.
 */
export function parseRetrySchedule(text: string): number[] {
  const entries = text.split(',').map((entry) => entry.trim())
  if (entries.length === 0 || entries.every((entry) => entry === '')) {
    throw new RangeError('WEBHOOK_RETRY_SCHEDULE: expected comma-separated durations such as 5s,5m,30m')
  }
  return entries.map((entry) => {
    const match = DURATION.exec(entry)
    if (!match) throw new RangeError(`WEBHOOK_RETRY_SCHEDULE: "${entry}" is not a duration (use ms, s, m, h or d, e.g. 500ms or 5m)`)
    const ms = Math.round(Number(match[1]) * UNIT_MS[match[2]!]!)
    if (ms > 30 * DAY) throw new RangeError(`WEBHOOK_RETRY_SCHEDULE: "${entry}" is longer than 30 days`)
    return ms
  })
}

export interface NextAttemptOptions {
  schedule?: readonly number[]
  /** From the receiver's `Retry-After` on a 429 or 503: the retry is never earlier than this. */
  retryAfterMs?: number | null
  /** A source of uniform [0, 1) numbers; `Math.random` in production, fixed in tests. */
  random: () => number
}

/**
 * When to make the attempt after `attempt` (1-based) failed at `nowMs`, or `null` when the
 * schedule is exhausted and the message has failed for good.
 */
export function nextAttemptAt(
  attempt: number,
  nowMs: number,
  { schedule = DEFAULT_RETRY_SCHEDULE_MS, retryAfterMs, random }: NextAttemptOptions,
): number | null {
  const base = schedule[attempt - 1]
  if (base === undefined) return null
  const jittered = Math.round(base * (1 - RETRY_JITTER + 2 * RETRY_JITTER * random()))
  const floor = retryAfterMs == null ? 0 : Math.min(Math.max(retryAfterMs, 0), MAX_RETRY_AFTER_MS)
  return nowMs + Math.max(jittered, floor)
}

export type DisableReason = '410' | '5_days'

export interface DisableInput {
  /** Earliest failure of this endpoint since its last success (any message), or null if none. */
  firstFailureAtMs: number | null
  nowMs: number
  /** HTTP status of the failed attempt, null when no response arrived. */
  status: number | null
}

/** Called after a failed attempt: should the endpoint be disabled, and why. */
export function shouldDisable({ firstFailureAtMs, nowMs, status }: DisableInput): DisableReason | null {
  // Standard Webhooks: 410 Gone means the receiver asks us to stop.
  if (status === 410) return '410'
  if (firstFailureAtMs !== null && nowMs - firstFailureAtMs >= DISABLE_AFTER_FAILING_MS) return '5_days'
  return null
}

const HTTP_DATE_MONTH = /\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\b/

/**
 * RFC 9110 §10.2.3: `Retry-After` is delay-seconds or an HTTP-date. Returns milliseconds from
 * `nowMs`, or null when absent or unparsable.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * SECOND
  // All three HTTP-date forms (IMF-fixdate, RFC 850, asctime) name the month; requiring it
  // keeps V8's lenient Date.parse from reading "-5" as a year.
  if (!HTTP_DATE_MONTH.test(trimmed)) return null
  const date = Date.parse(trimmed)
  if (Number.isNaN(date)) return null
  return Math.max(0, date - nowMs)
}
