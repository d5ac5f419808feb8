// Late readings judged from a delivery's recent history in memory (src/telemetry/cold-chain/recent-history.ts)
// must say exactly what a recompute from every stored reading says: same state, same new events.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  checkSilence,
  evaluate,
  initialColdChain,
  recompute,
  reconcile,
  type ColdChainState,
  type Reading,
  type RuleEvent,
} from '../../rules/index.js'
import { RecentHistory } from '../../src/telemetry/cold-chain/recent-history.js'
import { BOUND_AT, quick } from '../rules/helpers.js'

/**
 * Readings 10 s apart (some gaps), each arriving in order, a few readings late or hundreds late,
 * some sent twice (the copy sent again may carry another value: the first one stored stands); the
 * arrivals come in groups (what one commit gives the monitor), some followed by a wall-clock
 * silence check.
 */
const deliveries = fc
  .record({
    points: fc.array(
      fc.record({
        gap: fc.constantFrom(1, 1, 1, 1, 2, 40), // 40: past max_gap_s (300 s), a sensor gap
        temp_c: fc.oneof(fc.double({ min: 2.5, max: 7.5, noNaN: true }), fc.double({ min: -1, max: 15, noNaN: true })),
        delay: fc.oneof(fc.constant(0), fc.constant(0), fc.integer({ min: 1, max: 40 }), fc.integer({ min: 300, max: 900 })),
        resent: fc.oneof(fc.constant(null), fc.constant(null), fc.constant(null), fc.integer({ min: 1, max: 200 })),
      }),
      { minLength: 1, maxLength: 1_200, size: 'large' },
    ),
    groups: fc.array(fc.integer({ min: 1, max: 150 }), { minLength: 1, maxLength: 40 }),
    silences: fc.array(fc.integer({ min: 0, max: 600_000 }), { minLength: 1, maxLength: 40 }),
  })
  .map(({ points, groups, silences }) => {
    let ts = BOUND_AT
    const arrivals: { reading: Reading; at: number }[] = []
    points.forEach((p, i) => {
      const reading = { ts: (ts += p.gap * 10_000), temp_c: p.temp_c }
      arrivals.push({ reading, at: i + p.delay })
      if (p.resent !== null) arrivals.push({ reading: { ts: reading.ts, temp_c: p.temp_c + 3 }, at: i + p.delay + p.resent })
    })
    const inArrivalOrder = arrivals.sort((a, b) => a.at - b.at).map((a) => a.reading)
    const out: { group: Reading[]; silenceMs: number | null }[] = []
    for (let i = 0, g = 0; i < inArrivalOrder.length; g++) {
      const size = groups[g % groups.length]!
      out.push({ group: inArrivalOrder.slice(i, i + size), silenceMs: g % 3 === 0 ? silences[g % silences.length]! : null })
      i += size
    }
    return out
  })

type Judge = {
  /** Late readings (at or before lastTs, ts order): the state to continue with; new events go to `events`. */
  late(state: ColdChainState, late: readonly Reading[], stored: readonly Reading[], events: RuleEvent[]): ColdChainState
  /** Readings just evaluated in order. */
  evaluated?(readings: readonly Reading[], state: ColdChainState): void
}

/**
 * Judges groups as the monitor does (accept()): a group in ts order, its late readings (a prefix)
 * first, then the others evaluated; `stored` holds the first copy of each ts, as the store does.
 */
function run(groups: readonly { group: Reading[]; silenceMs: number | null }[], judge: Judge) {
  let state = initialColdChain(quick, BOUND_AT)
  const events: RuleEvent[] = []
  const stored: Reading[] = []
  let newest = BOUND_AT
  for (const { group, silenceMs } of groups) {
    const sorted = [...group].sort((a, b) => a.ts - b.ts)
    for (const reading of sorted) {
      let at = stored.length // kept in ts order, as the store reads them
      while (at > 0 && stored[at - 1]!.ts > reading.ts) at--
      if (at > 0 && stored[at - 1]!.ts === reading.ts) continue // a re-send: stored once
      stored.splice(at, 0, reading)
      newest = Math.max(newest, reading.ts)
    }
    const lastTs = state.lastTs
    const late = sorted.filter((r) => lastTs !== null && r.ts <= lastTs)
    const inOrder = sorted.filter((r) => lastTs === null || r.ts > lastTs)
    if (late.length) state = judge.late(state, late, stored, events)
    evaluate(state, quick, inOrder, events)
    judge.evaluated?.(inOrder, state)
    if (silenceMs !== null) checkSilence(state, quick, newest + silenceMs, events)
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
      fc.property(deliveries, (groups) => {
        const expected = run(groups, { late: (state, _, stored, events) => fromTheStore(state, stored, events) })
        let history = RecentHistory.replay(initialColdChain(quick, BOUND_AT), quick, []).history
        const actual = run(groups, {
          late(state, late, stored, events) {
            if (late.every((r) => history.covers(r.ts))) {
              judgedFromMemory++
              return history.judgeLate(late, state, quick, events)
            }
            // Older than the history: the monitor recomputes from the store, and keeps what it read.
            judgedFromStore++
            const upTo = state.lastTs!
            const replayed = RecentHistory.replay(
              initialColdChain(quick, BOUND_AT),
              quick,
              stored.filter((r) => r.ts <= upTo),
            )
            history = replayed.history
            return reconcile(state, replayed.state, replayed.events, events).state
          },
          evaluated: (readings, state) => history.evaluated(readings, state),
        })
        expect(actual.state).toEqual(expected.state)
        expect(actual.events).toEqual(expected.events)
      }),
      // 60 runs: with 20, the store path's count (a sum over runs of very different sizes) fell to
      // 10 in about one seed of 40; with 60 it stayed at 52 or more over 30 seeds.
      { numRuns: 60 },
    )
    // The arrivals exercise both paths, many times.
    expect(judgedFromMemory).toBeGreaterThan(100)
    expect(judgedFromStore).toBeGreaterThan(10)
  })

  it('ignores a late reading it already holds (same ts: the first one stored stands)', () => {
    const state = initialColdChain(quick, BOUND_AT)
    const { history } = RecentHistory.replay(initialColdChain(quick, BOUND_AT), quick, [])
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

  it('rebuilt from stored readings, judges the next late reading from memory, as a recompute from the store would', () => {
    const readings = Array.from({ length: 1_000 }, (_, i) => ({ ts: BOUND_AT + (i + 1) * 10_000, temp_c: 5 }))
    const { state, history } = RecentHistory.replay(initialColdChain(quick, BOUND_AT), quick, readings)
    expect(state).toEqual(recompute(initialColdChain(quick, BOUND_AT), quick, readings, [], Infinity).state)
    const late = { ts: BOUND_AT + 995 * 10_000 + 5_000, temp_c: -3 } // below hard_min_c: a break
    expect(history.covers(late.ts)).toBe(true)
    const events: RuleEvent[] = []
    const judged = history.judgeLate([late], state, quick, events)
    const expected: RuleEvent[] = []
    const all = [...readings, late].sort((a, b) => a.ts - b.ts)
    expect(judged).toEqual(recompute(state, quick, all, expected).state)
    expect(events).toEqual(expected)
    expect(events.map((e) => e.type)).toContain('cold-chain.break')
  })
})
