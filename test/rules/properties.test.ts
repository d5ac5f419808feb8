// Determinism of the cold-chain rules (SPEC §5), checked with fast-check over random deliveries:
// arrival order within the reorder window, duplicates, batching, restarts and wall-clock silence
// checks never change what the readings say. The one exception is the break a hard-limit reading
// raises on arrival (rules/hard-limit.ts): it is judged on what had arrived, and stands.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  beyondHardLimit,
  breakOnArrival,
  builtInProfiles,
  checkSilence,
  evaluate,
  initialColdChain,
  recompute,
  ReorderBuffer,
  replay,
  resolveProfile,
  summarize,
  type ColdChainState,
  type Reading,
  type RuleEvent,
  type TemperatureProfile,
} from '../../rules/index.js'
import { BOUND_AT, quick } from './helpers.js'

/** No gap detection, and an MKT limit inside the range so that MKT is what breaks. */
const ungapped = resolveProfile({ name: 'ungapped', min_c: 2, max_c: 8, grace_s: 120, max_gap_s: null, mkt_max_c: 5.5 })
const profiles: TemperatureProfile[] = [
  quick,
  ungapped,
  builtInProfiles.refrigerated,
  builtInProfiles.frozen,
  builtInProfiles.controlled_room,
]

type Step = { dt: number; u: number; keep: boolean; delay: number; tie: number }

const stepArb: fc.Arbitrary<Step> = fc.record({
  // Mostly dense sampling, sometimes a gap longer than max_gap_s.
  dt: fc.oneof(
    { arbitrary: fc.integer({ min: 1, max: 120_000 }), weight: 12 },
    { arbitrary: fc.integer({ min: 120_000, max: 2_400_000 }), weight: 1 },
  ),
  // Position relative to the allowed range in %: 0–100 inside, mild excursions, rarely past hard limits.
  u: fc.oneof(
    { arbitrary: fc.integer({ min: 0, max: 100 }), weight: 4 },
    { arbitrary: fc.integer({ min: -40, max: 140 }), weight: 3 },
    { arbitrary: fc.integer({ min: -150, max: 250 }), weight: 1 },
  ),
  // Temperatures persist: most readings repeat the previous level.
  keep: fc.integer({ min: 0, max: 9 }).map((x) => x < 8),
  delay: fc.integer({ min: 0, max: 999 }),
  tie: fc.nat(),
})

const deliveryArb = fc.record({
  profile: fc.constantFrom(...profiles),
  firstAfterMs: fc.integer({ min: 0, max: 1_500_000 }),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 200, size: 'max' }),
})

type Delivery = { profile: TemperatureProfile; readings: Reading[]; steps: Step[] }

function toDelivery({ profile, firstAfterMs, steps }: { profile: TemperatureProfile; firstAfterMs: number; steps: Step[] }): Delivery {
  let ts = BOUND_AT + firstAfterMs
  let u = 50
  const readings = steps.map((s, i) => {
    if (i > 0) ts += s.dt
    if (i === 0 || !s.keep) u = s.u
    const temp = profile.min_c + ((profile.max_c - profile.min_c) * u) / 100
    return { ts, temp_c: Math.round(temp * 10) / 10 + 0 } // + 0: no -0, which JSON cannot keep
  })
  return { profile, readings, steps }
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T
const byKey = (events: RuleEvent[]) => [...events].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))

/**
 * Live operation as the service runs it: readings arrive at `ts + delay` (any order that implies), go
 * through the reorder buffer and evaluate; a hard-limit reading is judged on arrival (breakOnArrival).
 * `arrivedAtBreak`: the readings that had arrived when the break went out.
 */
function live(d: Delivery, windowMs: number) {
  const arrivals = d.readings
    .map((reading, i) => ({ reading, arrival: reading.ts + Math.floor((d.steps[i]!.delay / 1000) * windowMs), tie: d.steps[i]!.tie }))
    .sort((a, b) => a.arrival - b.arrival || a.tie - b.tie)
  const buffer = new ReorderBuffer<Reading>(windowMs)
  const state = initialColdChain(d.profile, BOUND_AT)
  const events: RuleEvent[] = []
  const flags: { late: boolean; duplicate: boolean }[] = []
  let arrivedAtBreak: Reading[] | null = null
  const arrived: Reading[] = []
  for (const { reading, arrival } of arrivals) {
    const unbroken = state.broken === null
    evaluate(state, d.profile, buffer.flushSilent(arrival), events) // the wall-clock timer
    const pushed = buffer.push(reading, arrival)
    arrived.push(reading)
    flags.push({ late: pushed.late, duplicate: pushed.duplicate })
    evaluate(state, d.profile, pushed.released, events)
    breakOnArrival(state, d.profile, reading, buffer.held(), events)
    if (beyondHardLimit(d.profile, reading.temp_c)) expect(state.broken, 'a hard-limit reading breaks on arrival').not.toBeNull()
    if (unbroken && state.broken !== null) arrivedAtBreak = [...arrived]
  }
  const unbroken = state.broken === null
  evaluate(state, d.profile, buffer.flushAll(), events)
  if (unbroken && state.broken !== null) arrivedAtBreak = [...arrived]
  return { state, events, flags, buffer, arrivedAtBreak }
}

const RUNS = { numRuns: 300 }

describe('determinism (fast-check)', () => {
  it('any arrival order within the reorder window yields exactly the events of in-order arrival, but for a break raised on arrival', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), fc.constantFrom(0, 1_000, 30_000, 120_000), (d, windowMs) => {
        const inOrder = replay(d.profile, BOUND_AT, d.readings)
        const shuffled = live(d, windowMs)
        expect(shuffled.flags.every((f) => !f.late && !f.duplicate)).toBe(true)
        // Every other rule (excursions, recoveries, sensor gaps, stability warnings) and every figure: as in order.
        const notBreak = (es: RuleEvent[]) => es.filter((e) => e.type !== 'cold-chain.break')
        expect(notBreak(shuffled.events)).toEqual(notBreak(inOrder.events))
        expect({ ...shuffled.state, broken: null }).toEqual({ ...inOrder.state, broken: null })
        // One break in both or in neither, never raised twice.
        const liveBreaks = shuffled.events.filter((e) => e.type === 'cold-chain.break')
        const orderBreak = inOrder.events.find((e) => e.type === 'cold-chain.break')
        expect(liveBreaks.length).toBe(orderBreak ? 1 : 0)
        if (!orderBreak) return
        const liveBreak = liveBreaks[0]!
        // The break is the in-order judgement of the readings that had arrived when it went out …
        const arrived = [...shuffled.arrivedAtBreak!].sort((a, b) => a.ts - b.ts)
        expect(liveBreak).toEqual(replay(d.profile, BOUND_AT, arrived).events.find((e) => e.type === 'cold-chain.break'))
        expect(shuffled.state.broken).toEqual({ reason: liveBreak.data.reason, at: liveBreak.at })
        // … so it is never earlier than in order, and it is the in-order break unless a reading at or
        // before it arrived after it (one the window would have waited for).
        expect(liveBreak.at).toBeGreaterThanOrEqual(orderBreak.at)
        const missed = d.readings.some((r) => r.ts <= liveBreak.at && !arrived.includes(r))
        if (!missed) expect(liveBreak).toEqual(orderBreak)
      }),
      RUNS,
    )
  })

  it('readings that arrive in event-time order give exactly the events of in-order arrival, a hard-limit break only sooner', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), fc.constantFrom(0, 30_000, 600_000), (d, windowMs) => {
        const inOrderArrival = live({ ...d, steps: d.steps.map((s) => ({ ...s, delay: 0 })) }, windowMs)
        const inOrder = replay(d.profile, BOUND_AT, d.readings)
        expect(byKey(inOrderArrival.events)).toEqual(byKey(inOrder.events))
        expect(inOrderArrival.state).toEqual(inOrder.state)
      }),
      RUNS,
    )
  })

  it('replaying a batch again (duplicates) changes nothing', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), fc.array(fc.nat(), { minLength: 1, maxLength: 30 }), (d, picks) => {
        const { state, events } = replay(d.profile, BOUND_AT, d.readings)
        const before = clone(state)
        const again = picks.map((i) => d.readings[i % d.readings.length]!).sort((a, b) => a.ts - b.ts)

        // Straight into the engine: skipped.
        expect(evaluate(state, d.profile, again).events).toEqual([])
        expect(state).toEqual(before)

        // Through the reorder window: flagged, never released; recomputing with them adds nothing.
        const { buffer, state: liveState } = live(d, 30_000)
        const arrival = d.readings.at(-1)!.ts + 60_000
        for (const r of again) {
          const pushed = buffer.push(r, arrival)
          expect(pushed.released).toEqual([])
          expect(pushed.late).toBe(true)
        }
        const redone = recompute(liveState, d.profile, d.readings)
        expect(redone.events).toEqual([])
        expect(redone.state).toEqual(liveState)
        expect(events.filter((e) => e.type === 'cold-chain.break').length).toBeLessThanOrEqual(1)
      }),
      RUNS,
    )
  })

  it('replay() of all readings equals incremental evaluation, across batches and JSON restarts', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), fc.array(fc.boolean(), { maxLength: 120 }), (d, cuts) => {
        let state: ColdChainState = initialColdChain(d.profile, BOUND_AT)
        const events: RuleEvent[] = []
        let batch: Reading[] = []
        d.readings.forEach((r, i) => {
          batch.push(r)
          if (cuts[i]) {
            evaluate(state, d.profile, batch, events)
            state = clone(state) // persisted and restored after a restart
            batch = []
          }
        })
        evaluate(state, d.profile, batch, events)
        const replayed = replay(d.profile, BOUND_AT, d.readings)
        expect(events).toEqual(replayed.events)
        expect(state).toEqual(replayed.state)
        expect(summarize(state)).toEqual(summarize(replayed.state))
      }),
      RUNS,
    )
  })

  it('wall-clock silence checks between readings announce nothing the readings would not', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), (d) => {
        // The tote's clock is the wall clock; the timer fires just before each reading arrives.
        const state = initialColdChain(d.profile, BOUND_AT)
        const events: RuleEvent[] = []
        for (const r of d.readings) {
          checkSilence(state, d.profile, r.ts - 1, events)
          evaluate(state, d.profile, [r], events)
        }
        const replayed = replay(d.profile, BOUND_AT, d.readings)
        const withoutBackOnline = (es: RuleEvent[]) =>
          byKey(es).map((e) => (e.type === 'sensor.offline' ? { ...e, data: { ...e.data, back_online_at: null } } : e))
        expect(withoutBackOnline(events)).toEqual(withoutBackOnline(replayed.events))
        expect(summarize(state)).toEqual(summarize(replayed.state))
      }),
      RUNS,
    )
  })

  it('events come in event-time order, with unique keys, at most one break, and a recovery only after its excursion', () => {
    fc.assert(
      fc.property(deliveryArb.map(toDelivery), (d) => {
        const { state, events } = replay(d.profile, BOUND_AT, d.readings)
        const ats = events.map((e) => e.at)
        expect(ats).toEqual([...ats].sort((a, b) => a - b))
        expect(new Set(events.map((e) => e.key)).size).toBe(events.length)
        const breaks = events.filter((e) => e.type === 'cold-chain.break')
        expect(breaks.length).toBeLessThanOrEqual(1)
        const announced = new Set<string>()
        for (const e of events) {
          if (e.type === 'temperature.excursion') announced.add(e.data.excursion_started_at)
          if (e.type === 'temperature.recovered') expect(announced.has(e.data.excursion_started_at)).toBe(true)
        }
        const summary = summarize(state)
        expect(summary.state === 'BROKEN').toBe(breaks.length === 1)
        expect(summary.unknown_s).toBeLessThanOrEqual(summary.time_out_of_range_s)
        const excursionTime = summary.excursions.reduce((sum, x) => sum + x.duration_s, 0)
        expect(excursionTime).toBeLessThanOrEqual(summary.time_out_of_range_s + 1e-9)
      }),
      RUNS,
    )
  })

  it('the random deliveries above reach every rule (so the properties are not vacuous)', () => {
    const seen = new Map<string, number>()
    for (const input of fc.sample(deliveryArb, { numRuns: 500, seed: 42 })) {
      const d = toDelivery(input)
      for (const e of replay(d.profile, BOUND_AT, d.readings).events) {
        const name = e.type === 'cold-chain.break' ? `break:${e.data.reason}` : e.type
        seen.set(name, (seen.get(name) ?? 0) + 1)
      }
    }
    console.log(Object.fromEntries(seen))
    for (const name of [
      'temperature.excursion',
      'temperature.recovered',
      'sensor.offline',
      'break:hard_limit',
      'break:excursion_too_long',
      'break:cumulative_budget',
      'break:mkt_exceeded',
      'break:sensor_gap',
    ]) {
      expect(seen.get(name) ?? 0, name).toBeGreaterThanOrEqual(5)
    }
  })
})
