import type { Clock } from '../../src/clock.js'

/** A clock the test moves by hand; the service reads it wherever it needs "now". */
export function testClock(startMs = Date.now()): Clock & { advance(ms: number): void; set(ms: number): void } {
  let now = startMs
  return {
    now: () => now,
    advance: (ms) => void (now += ms),
    set: (ms) => void (now = ms),
  }
}

export const SECOND = 1_000
export const MINUTE = 60 * SECOND
export const HOUR = 60 * MINUTE
