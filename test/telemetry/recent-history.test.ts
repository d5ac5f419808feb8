// Late readings judged from a delivery's recent history in memory (src/telemetry/cold-chain/recent-history.ts)
// must say exactly what a recompute from every stored reading says: same state, same new events.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  evaluate,
  initialColdChain,
  recompute,
  resolveProfile,
  type ColdChainState,
  type Reading,
  type RuleEvent,
} from '../../rules/index.js'
import { RecentHistory } from '../../src/telemetry/cold-chain/recent-history.js'

const BOUND_AT = Date.UTC(2026, 0, 1)
/** Short limits, so that a few hundred readings of 10 s hit every rule. */
const quick = resolveProfile({
  name: 'quick',
  min_c: 2,
  max_c: 8,
  grace_s: 60,
  max_excursion_s: 600,
  max_cumulative_s: 900,
  hard_min_c: 0,
  hard_max_c: 14,
  mkt_max_c: 8,
  max_gap_s: 120,
})

/** Readings 10 s apart (some gaps), each arriving either in order or `delay` readings late. */
const deliveries = fc
  .array(
    fc.record({
      gap: fc.constantFrom(1, 1, 1, 1, 2, 20),
      temp_c: fc.oneof(fc.double({ min: 2.5, max: 7.5, noNaN: true }), fc.double({ min: -1, max: 15, noNaN: true })),
      delay: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 300, max: 900 })),
    }),
    { minLength: 1, maxLength: 1_200, size: 'large' },
  )
  .map((points) => {
    let ts = BOUND_AT
    const arrivals = points.map((p, i) => ({ reading: { ts: (ts += p.gap * 10_000), temp_c: p.temp_c }, at: i + p.delay }))
    return arrivals.sort((a, b) => a.at - b.at).map((a) => a.reading)
  })

type Judge = {
  /** A late reading (at or before lastTs): the state to continue with; new events go to `events`. */
  late(state: ColdChainState, reading: Reading, stored: readonly Reading[], events: RuleEvent[]): ColdChainState
  /** A reading just evaluated in order. */
  evaluated?(reading: Reading, state: ColdChainState): void
}

/** Judges arrivals as the monitor does: in-order readings by evaluate(), late ones by `judge.late`. */
function run(arrivals: readonly Reading[], judge: Judge) {
  let state = initialColdChain(quick, BOUND_AT)
  const events: RuleEvent[] = []
  const stored: Reading[] = []
  for (const reading of arrivals) {
    let at = stored.length // kept in ts order, as the store reads them
    while (at > 0 && stored[at - 1]!.ts > reading.ts) at--
    stored.splice(at, 0, reading)
    if (state.lastTs !== null && reading.ts <= state.lastTs) {
      state = judge.late(state, reading, stored, events)
      continue
    }
    evaluate(state, quick, [reading], events)
    judge.evaluated?.(reading, state)
  }
  return { state, events }
}

const fromTheStore = (state: ColdChainState, stored: readonly Reading[], events: RuleEvent[]) =>
  recompute(state, quick, stored, events).state

describe('late readings judged from recent history', () => {
  it('give the state and events of a recompute from every stored reading, when the history reaches back to them', () => {
    let judgedFromMemory = 0
    let judgedFromStore = 0
    fc.assert(
      fc.property(deliveries, (arrivals) => {
        const expected = run(arrivals, { late: (state, _, stored, events) => fromTheStore(state, stored, events) })
        let history = new RecentHistory(initialColdChain(quick, BOUND_AT))
        const actual = run(arrivals, {
          late(state, reading, stored, events) {
            if (history.covers(reading.ts)) {
              judgedFromMemory++
              return history.judgeLate([reading], state, quick, events)
            }
            judgedFromStore++ // older than the history: the monitor recomputes from the store and starts again
            const rebuilt = fromTheStore(state, stored, events)
            history = new RecentHistory(rebuilt)
            return rebuilt
          },
          evaluated: (reading, state) => history.evaluated([reading], state),
        })
        expect(actual.state).toEqual(expected.state)
        expect(actual.events).toEqual(expected.events)
      }),
      { numRuns: 20 },
    )
    // The arrivals exercise both paths, many times.
    expect(judgedFromMemory).toBeGreaterThan(1_000)
    expect(judgedFromStore).toBeGreaterThan(10)
  })

  it('ignores a late reading it already holds (same ts: the first one stored stands)', () => {
    const state = initialColdChain(quick, BOUND_AT)
    const history = new RecentHistory(state)
    const readings = [
      { ts: BOUND_AT + 10_000, temp_c: 5 },
      { ts: BOUND_AT + 20_000, temp_c: 5 },
    ]
    evaluate(state, quick, readings)
    history.evaluated(readings, state)
    const events: RuleEvent[] = []
    expect(history.judgeLate([{ ts: BOUND_AT + 10_000, temp_c: -5 }], state, quick, events)).toBe(state)
    expect(events).toEqual([])
  })
})
