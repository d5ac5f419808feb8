import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  ARRIVING_WITHIN_M,
  computedEtaMs,
  decideEta,
  distanceM,
  ETA_CHANGE_MIN_INTERVAL_MS,
  ETA_CHANGE_THRESHOLD_MS,
  etaInForce,
  MAX_CLOCK_SKEW_MS,
  positionProblems,
  type EtaState,
} from '../../src/domain/eta.js'

/** The pure ETA and geometry of docs/fleet.md (Live location and ETA), held to their promises on any input. */

const lat = fc.double({ min: -90, max: 90, noNaN: true })
const lng = fc.double({ min: -180, max: 180, noNaN: true })
const point = fc.record({ lat, lng })
const HALF_CIRCUMFERENCE_M = Math.PI * 6_371_008.8

describe('distance (haversine)', () => {
  it('is symmetric, never negative, zero to itself, and at most half the circumference', () => {
    fc.assert(
      fc.property(point, point, (a, b) => {
        const d = distanceM(a, b)
        expect(d).toBeGreaterThanOrEqual(0)
        expect(d).toBeLessThanOrEqual(HALF_CIRCUMFERENCE_M + 1e-6)
        expect(Math.abs(d - distanceM(b, a))).toBeLessThan(1e-6)
        expect(distanceM(a, a)).toBe(0)
      }),
    )
  })

  it('obeys the triangle inequality, to within a metre', () => {
    // Near antipodal points asin(√h) with h ≈ 1 keeps about √ε of precision: ~0.1 m on the Earth's radius.
    fc.assert(fc.property(point, point, point, (a, b, c) => distanceM(a, c) <= distanceM(a, b) + distanceM(b, c) + 1))
  })
})

describe('computed ETA', () => {
  it('is never before now, and farther or slower is never sooner', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2e12 }),
        fc.integer({ min: -3_600_000, max: 3_600_000 }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 1, max: 200, noNaN: true }),
        (now, lag, d1, d2, speed) => {
          const at = now - lag
          expect(computedEtaMs(at, d1, speed, now)).toBeGreaterThanOrEqual(now)
          const [near, far] = d1 <= d2 ? [d1, d2] : [d2, d1]
          expect(computedEtaMs(at, near, speed, now)).toBeLessThanOrEqual(computedEtaMs(at, far, speed, now))
          expect(computedEtaMs(at, far, speed, now)).toBeGreaterThanOrEqual(computedEtaMs(at, far, speed * 2, now))
        },
      ),
    )
  })

  it("takes the router's ETA while it holds, the computed one after", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 1e9 }),
        fc.integer({ min: 0, max: 1e9 }),
        fc.integer({ min: 0, max: 1e9 }),
        (eta, until, now) => {
          expect(etaInForce({ etaMs: eta, untilMs: until }, 42, now)).toBe(now < until ? eta : 42)
          expect(etaInForce(null, null, now)).toBeNull()
        },
      ),
    )
  })
})

describe('ETA announcements', () => {
  /** A delivery followed through a run of (time step, ETA, distance) observations. */
  const run = fc.array(
    fc.record({
      stepMs: fc.integer({ min: 0, max: 3 * 60_000 }),
      etaMs: fc.integer({ min: 0, max: 4 * 3_600_000 }),
      distance: fc.option(fc.double({ min: 0, max: 50_000, noNaN: true })),
    }),
    { maxLength: 60 },
  )

  it('announces only moves of 5 min or more, never two within a minute, and arriving at most once, within 500 m', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4 * 3_600_000 }), run, (promised, steps) => {
        let state: EtaState = { announcedMs: promised, announcedAtMs: null, arriving: false }
        let now = 0
        const changes: number[] = []
        let arrivals = 0
        for (const { stepMs, etaMs, distance } of steps) {
          now += stepMs
          const before = state
          const decision = decideEta(state, etaMs, distance, now)
          if (decision.changed) {
            expect(Math.abs(etaMs - before.announcedMs)).toBeGreaterThanOrEqual(ETA_CHANGE_THRESHOLD_MS)
            if (changes.length) expect(now - changes.at(-1)!).toBeGreaterThanOrEqual(ETA_CHANGE_MIN_INTERVAL_MS)
            changes.push(now)
            expect(decision.next.announcedMs).toBe(etaMs)
          } else expect(decision.next.announcedMs).toBe(before.announcedMs)
          if (decision.arriving) {
            arrivals++
            expect(distance).not.toBeNull()
            expect(distance!).toBeLessThanOrEqual(ARRIVING_WITHIN_M)
          }
          state = decision.next
        }
        expect(arrivals).toBeLessThanOrEqual(1)
      }),
    )
  })

  it('loses no move: a move held back by the minute is announced by the first observation after it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1e9 }), fc.integer({ min: ETA_CHANGE_THRESHOLD_MS, max: 1e8 }), (t, move) => {
        const state: EtaState = { announcedMs: 10 * 3_600_000, announcedAtMs: t, arriving: false }
        const moved = state.announcedMs + move
        expect(decideEta(state, moved, null, t + ETA_CHANGE_MIN_INTERVAL_MS - 1).changed).toBe(false)
        expect(decideEta(state, moved, null, t + ETA_CHANGE_MIN_INTERVAL_MS).changed).toBe(true)
      }),
    )
  })
})

describe('position validation', () => {
  const good = fc.record({
    lat,
    lng,
    accuracy_m: fc.double({ min: 0, max: 10_000, noNaN: true }),
    at: fc.integer({ min: 0, max: 2e12 }),
  })
  it('accepts every position in range up to the allowed clock skew, and refuses one further ahead or out of range', () => {
    fc.assert(
      fc.property(good, fc.integer({ min: 0, max: 1e9 }), (p, ahead) => {
        const now = p.at - Math.min(ahead, MAX_CLOCK_SKEW_MS)
        const position = { ...p, at: new Date(p.at).toISOString() }
        expect(positionProblems(position, now)).toEqual([])
        expect(positionProblems(position, p.at - MAX_CLOCK_SKEW_MS - 1 - (ahead % 1000))).toEqual([
          expect.objectContaining({ pointer: '/at' }),
        ])
        expect(positionProblems({ ...position, lat: 90.0001 + (ahead % 100) }, p.at).map((e) => e.pointer)).toEqual(['/lat'])
        expect(positionProblems({ ...position, lng: -180.0001 - (ahead % 100) }, p.at).map((e) => e.pointer)).toEqual(['/lng'])
      }),
    )
  })
})
