import { fc, test } from '@fast-check/vitest'
import { describe, expect, it } from 'vitest'
import {
  DEFAULT_RETRY_SCHEDULE_MS,
  nextAttemptAt,
  parseRetryAfter,
  parseRetrySchedule,
  shouldDisable,
} from '../../src/webhooks/retry-policy.js'

const SEC = 1_000
const MIN = 60 * SEC
const HOUR = 60 * MIN
const DAY = 24 * HOUR
const middle = () => 0.5 // no jitter

describe('WEBHOOK_RETRY_SCHEDULE', () => {
  it('parses comma-separated durations in ms, s, m, h and d', () => {
    expect(parseRetrySchedule('1s,2s,500ms,5m,2h')).toEqual([SEC, 2 * SEC, 500, 5 * MIN, 2 * HOUR])
    expect(parseRetrySchedule(' 1.5s , 1d ')).toEqual([1_500, DAY])
  })

  it('names the bad entry', () => {
    expect(() => parseRetrySchedule('1s,5,2h')).toThrow(/WEBHOOK_RETRY_SCHEDULE: "5" is not a duration/)
    expect(() => parseRetrySchedule('1s,,2h')).toThrow(/"" is not a duration/)
    expect(() => parseRetrySchedule('-1s')).toThrow(/not a duration/)
    expect(() => parseRetrySchedule('')).toThrow(/comma-separated durations/)
    expect(() => parseRetrySchedule('31d')).toThrow(/longer than 30 days/)
  })

  it('defaults to SPEC §7: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h', () => {
    expect(DEFAULT_RETRY_SCHEDULE_MS).toEqual(parseRetrySchedule('5s,5m,30m,2h,5h,10h,10h'))
  })
})

describe('next attempt', () => {
  it('follows the schedule after each failed attempt, then gives up', () => {
    const now = 1_000_000
    const delays = [1, 2, 3, 4, 5, 6, 7].map((attempt) => nextAttemptAt(attempt, now, { random: middle })! - now)
    expect(delays).toEqual(DEFAULT_RETRY_SCHEDULE_MS)
    expect(nextAttemptAt(8, now, { random: middle })).toBeNull()
    expect(nextAttemptAt(3, now, { schedule: [100, 200], random: middle })).toBeNull()
  })

  test.prop([fc.integer({ min: 1, max: 7 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true })])(
    'jitters within ±20 % of the scheduled delay',
    (attempt, r) => {
      const base = DEFAULT_RETRY_SCHEDULE_MS[attempt - 1]!
      const delay = nextAttemptAt(attempt, 0, { random: () => r })!
      expect(delay).toBeGreaterThanOrEqual(Math.floor(base * 0.8))
      expect(delay).toBeLessThanOrEqual(Math.ceil(base * 1.2))
    },
  )

  it('never retries earlier than Retry-After, but a short Retry-After does not hurry the schedule', () => {
    expect(nextAttemptAt(1, 0, { retryAfterMs: 60 * SEC, random: () => 0.99 })).toBe(60 * SEC)
    expect(nextAttemptAt(2, 0, { retryAfterMs: 1 * SEC, random: middle })).toBe(5 * MIN)
    expect(nextAttemptAt(1, 0, { retryAfterMs: 365 * DAY, random: middle })).toBe(DAY) // capped
    expect(nextAttemptAt(8, 0, { retryAfterMs: SEC, random: middle })).toBeNull()
  })
})

describe('Retry-After header', () => {
  const now = Date.parse('2025-03-01T12:00:00Z')
  it('reads delay-seconds and HTTP dates (RFC 9110 §10.2.3)', () => {
    expect(parseRetryAfter('120', now)).toBe(120 * SEC)
    expect(parseRetryAfter('Sat, 01 Mar 2025 12:00:30 GMT', now)).toBe(30 * SEC)
    expect(parseRetryAfter('Sat, 01 Mar 2025 11:00:00 GMT', now)).toBe(0)
  })
  it('ignores what it cannot read', () => {
    expect(parseRetryAfter(undefined, now)).toBeNull()
    expect(parseRetryAfter('soon', now)).toBeNull()
    expect(parseRetryAfter('-5', now)).toBeNull()
  })
})

describe('disabling an endpoint', () => {
  const now = 10 * DAY
  it('disables at once on 410 Gone', () => {
    expect(shouldDisable({ firstFailureAtMs: null, nowMs: now, status: 410 })).toBe('410')
  })
  it('disables an endpoint that has been failing for 5 days', () => {
    expect(shouldDisable({ firstFailureAtMs: now - 5 * DAY, nowMs: now, status: 500 })).toBe('5_days')
    expect(shouldDisable({ firstFailureAtMs: now - 5 * DAY, nowMs: now, status: null })).toBe('5_days')
  })
  it('keeps an endpoint failing for less than 5 days', () => {
    expect(shouldDisable({ firstFailureAtMs: now - 5 * DAY + 1, nowMs: now, status: 503 })).toBeNull()
    expect(shouldDisable({ firstFailureAtMs: null, nowMs: now, status: 500 })).toBeNull()
  })
})
