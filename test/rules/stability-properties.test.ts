// Determinism and conservation of the stability ledger, checked with fast-check over random deliveries.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  breakOnArrival,
  chargeReadings,
  evaluate,
  initialColdChain,
  nextLeg,
  openLedger,
  startLedger,
  ReorderBuffer,
  replay,
  resolveProfile,
  summarizeStability,
  type ItemStability,
  type Reading,
  type StabilityEvent,
  type StabilityLedger,
} from '../../rules/index.js'
import { jcsHash } from '../../src/hashing.js'
import { BOUND_AT } from './helpers.js'

/** Three products with 1–6 bands each, touching storage and each other, some with hard and freeze-thaw limits. */
const items: ItemStability[] = [
  {
    ndc: '00002-8215-01',
    product_id: 'pr_a',
    version: 1,
    stability: {
      storage: { min_c: 2, max_c: 8 },
      budgets: [
        { min_c: 8, max_c: 12, allowed_s: 7200 },
        { min_c: 12, max_c: 18, allowed_s: 1800 },
        { min_c: 18, max_c: 25, allowed_s: 600 },
        { min_c: 0, max_c: 2, allowed_s: 3600 },
        { min_c: -3, max_c: 0, allowed_s: 900 },
        { min_c: 25, max_c: 30, allowed_s: 0 },
      ],
      freeze_thaw_max: 2,
      hard_min_c: -3,
      hard_max_c: 32,
      source: 'study A',
    },
  },
  {
    ndc: '00003-0001-11',
    product_id: 'pr_b',
    version: 3,
    stability: {
      storage: { min_c: 2, max_c: 8 },
      budgets: [{ min_c: 8, max_c: 25, allowed_s: 14_400 }],
      freeze_thaw_max: null,
      source: 'label',
    },
  },
  {
    ndc: '00004-0002-22',
    product_id: 'pr_c',
    version: 2,
    stability: {
      storage: { min_c: 0, max_c: 10 },
      budgets: [
        { min_c: 10, max_c: 20, allowed_s: 36_000 },
        { min_c: -10, max_c: 0, allowed_s: 3600 },
      ],
      freeze_thaw_max: 0,
      source: 'letter',
    },
  },
]

type Step = { dt: number; temp: number; delay: number; tie: number }

const stepArb: fc.Arbitrary<Step> = fc.record({
  dt: fc.oneof(
    { arbitrary: fc.integer({ min: 1, max: 120_000 }), weight: 12 },
    { arbitrary: fc.integer({ min: 120_000, max: 3_600_000 }), weight: 1 },
  ),
  // Tenths of a degree, mostly around storage, sometimes exactly on a band edge.
  temp: fc.oneof(
    { arbitrary: fc.integer({ min: 20, max: 80 }).map((t) => t / 10), weight: 5 },
    { arbitrary: fc.integer({ min: -60, max: 340 }).map((t) => t / 10), weight: 3 },
    { arbitrary: fc.constantFrom(-3, 0, 2, 8, 10, 12, 18, 20, 25, 30), weight: 2 },
  ),
  delay: fc.integer({ min: 0, max: 999 }),
  tie: fc.nat(),
})

const deliveryArb = fc.record({
  maxGapS: fc.constantFrom(300, 900, null),
  steps: fc.array(stepArb, { minLength: 1, maxLength: 200 }),
})

function toReadings(steps: Step[], startMs = BOUND_AT): Reading[] {
  let ts = startMs
  return steps.map((s, i) => {
    if (i > 0) ts += s.dt
    return { ts, temp_c: s.temp + 0 }
  })
}

const fold = (maxGapS: number | null, readings: Reading[], events: StabilityEvent[] = []) =>
  chargeReadings(openLedger(items, maxGapS), readings, events).ledger

const RUNS = { numRuns: 300 }

describe('the stability ledger (fast-check)', () => {
  it('gives a byte-identical ledger and events for any arrival order within the reorder window', () => {
    fc.assert(
      fc.property(deliveryArb, fc.constantFrom(0, 1_000, 30_000, 120_000), ({ maxGapS, steps }, windowMs) => {
        const readings = toReadings(steps)
        const inOrderEvents: StabilityEvent[] = []
        const inOrder = fold(maxGapS, readings, inOrderEvents)

        const arrivals = readings
          .map((r, i) => ({ r, arrival: r.ts + Math.floor((steps[i]!.delay / 1000) * windowMs), tie: steps[i]!.tie }))
          .sort((a, b) => a.arrival - b.arrival || a.tie - b.tie)
        const buffer = new ReorderBuffer<Reading>(windowMs)
        const live = openLedger(items, maxGapS)
        const liveEvents: StabilityEvent[] = []
        for (const { r, arrival } of arrivals) {
          chargeReadings(live, buffer.flushSilent(arrival), liveEvents)
          chargeReadings(live, buffer.push(r, arrival).released, liveEvents)
        }
        chargeReadings(live, buffer.flushAll(), liveEvents)

        expect(jcsHash(live)).toBe(jcsHash(inOrder))
        expect(jcsHash(liveEvents)).toBe(jcsHash(inOrderEvents))
        expect(jcsHash(summarizeStability(live, ['dl_1']))).toBe(jcsHash(summarizeStability(inOrder, ['dl_1'])))
      }),
      RUNS,
    )
  })

  it('stays byte-identical when the delivery runs through the rule engine and a hard limit breaks on arrival', () => {
    fc.assert(
      fc.property(deliveryArb, fc.constantFrom(1_000, 30_000, 120_000), fc.boolean(), ({ maxGapS, steps }, windowMs, auto) => {
        const readings = toReadings(steps)
        const base = resolveProfile({ name: 'custom', min_c: 2, max_c: 8, hard_min_c: 0, hard_max_c: 30, max_gap_s: maxGapS })
        const profile = { ...base, stability: { items, carried: null, legs: ['dl_1'], auto } }
        const inOrder = replay(profile, BOUND_AT, readings).state.stability!

        const arrivals = readings
          .map((r, i) => ({ r, arrival: r.ts + Math.floor((steps[i]!.delay / 1000) * windowMs), tie: steps[i]!.tie }))
          .sort((a, b) => a.arrival - b.arrival || a.tie - b.tie)
        const buffer = new ReorderBuffer<Reading>(windowMs)
        const state = initialColdChain(profile, BOUND_AT)
        for (const { r, arrival } of arrivals) {
          evaluate(state, profile, buffer.flushSilent(arrival))
          evaluate(state, profile, buffer.push(r, arrival).released)
          breakOnArrival(state, profile, r, buffer.held())
        }
        evaluate(state, profile, buffer.flushAll())
        expect(jcsHash(state.stability!)).toBe(jcsHash(inOrder))
      }),
      RUNS,
    )
  })

  it('charges every moment once: consumed over the bands + storage + time in no band = the observed span', () => {
    fc.assert(
      fc.property(deliveryArb, ({ maxGapS, steps }) => {
        const readings = toReadings(steps)
        const ledger = fold(maxGapS, readings)
        const span = readings[readings.length - 1]!.ts - readings[0]!.ts
        expect(ledger.observed_ms).toBe(span)
        for (const item of ledger.items) {
          const bands = item.bands.reduce((sum, b) => sum + b.consumed_ms, 0)
          expect(bands + item.storage_ms + item.unbanded_ms).toBe(span)
        }
      }),
      RUNS,
    )
  })

  it('never shows a negative budget, and the remaining fraction is a share', () => {
    fc.assert(
      fc.property(deliveryArb, ({ maxGapS, steps }) => {
        const summary = summarizeStability(fold(maxGapS, toReadings(steps)), ['dl_1'])
        for (const item of summary.items) for (const band of item.bands) expect(band.remaining_s).toBeGreaterThanOrEqual(0)
        expect(summary.remaining_fraction).toBeGreaterThanOrEqual(0)
        expect(summary.remaining_fraction).toBeLessThanOrEqual(1)
        const exhausted = summary.items.some((i) => i.verdict === 'exhausted')
        if (exhausted) expect(summary.remaining_fraction).toBe(0)
      }),
      RUNS,
    )
  })

  it('composes: the ledger of a whole stream = continuing the ledger of any prefix with the rest', () => {
    fc.assert(
      fc.property(deliveryArb, fc.nat(), ({ maxGapS, steps }, cut) => {
        const readings = toReadings(steps)
        const k = cut % (readings.length + 1)
        const whole: StabilityEvent[] = []
        const parts: StabilityEvent[] = []
        const first = fold(maxGapS, readings.slice(0, k), parts)
        const continued = JSON.parse(JSON.stringify(first)) as StabilityLedger // as persisted
        chargeReadings(continued, readings.slice(k), parts)
        expect(jcsHash(continued)).toBe(jcsHash(fold(maxGapS, readings, whole)))
        expect(jcsHash(parts)).toBe(jcsHash(whole))
      }),
      RUNS,
    )
  })

  it('legs compose: a redelivery continues from the earlier leg and charges each leg’s own span only', () => {
    fc.assert(
      fc.property(deliveryArb, deliveryArb, ({ maxGapS, steps }, { steps: steps2 }) => {
        const leg1 = toReadings(steps)
        const leg2 = toReadings(steps2, leg1[leg1.length - 1]!.ts + 86_400_000)
        const events: StabilityEvent[] = []
        const ledger = chargeReadings(nextLeg(fold(maxGapS, leg1, events)), leg2, events).ledger
        const spans = leg1[leg1.length - 1]!.ts - leg1[0]!.ts + (leg2[leg2.length - 1]!.ts - leg2[0]!.ts)
        expect(ledger.observed_ms).toBe(spans)
        for (const item of ledger.items) {
          expect(item.bands.reduce((sum, b) => sum + b.consumed_ms, 0) + item.storage_ms + item.unbanded_ms).toBe(spans)
        }
        // Each band warns at most once and each item is exhausted at most once, across legs.
        const keys = events.map((e) => e.key)
        expect(new Set(keys).size).toBe(keys.length)
        // Consumption only grows from one leg to the next.
        const alone = fold(maxGapS, leg2)
        ledger.items.forEach((item, i) =>
          item.bands.forEach((b, j) => expect(b.consumed_ms).toBeGreaterThanOrEqual(alone.items[i]!.bands[j]!.consumed_ms)),
        )
      }),
      RUNS,
    )
  })
  it('assessments give budget back without touching consumption, and only ever move an item towards within', () => {
    const addBackArb = fc.array(
      fc.record({ item: fc.nat({ max: items.length - 1 }), band: fc.nat({ max: 5 }), add_back_s: fc.integer({ min: 0, max: 7200 }) }),
      { maxLength: 4 },
    )
    fc.assert(
      fc.property(deliveryArb, deliveryArb, addBackArb, ({ maxGapS, steps }, { steps: steps2 }, picks) => {
        const addBacks = picks.map((p) => ({ ndc: items[p.item]!.ndc, band: p.band, add_back_s: p.add_back_s }))
        const leg1 = toReadings(steps)
        const leg2 = toReadings(steps2, leg1[leg1.length - 1]!.ts + 86_400_000)
        const carried = fold(maxGapS, leg1)
        const plain = chargeReadings(startLedger({ items, carried, legs: ['dl_1', 'dl_2'] }, maxGapS), leg2).ledger
        const assessed = chargeReadings(startLedger({ items, carried, legs: ['dl_1', 'dl_2'], add_backs: addBacks }, maxGapS), leg2).ledger
        assessed.items.forEach((item, i) => {
          const before = plain.items[i]!
          expect(item.bands.map((b) => b.consumed_ms)).toEqual(before.bands.map((b) => b.consumed_ms))
          // An item within budget without assessments stays within with them.
          if (before.exhausted === null) expect(item.exhausted).toBeNull()
          // Remaining is never negative, and never less than without assessments.
          const summary = summarizeStability(assessed).items[i]!
          summary.bands.forEach((b, j) => {
            expect(b.remaining_s).toBeGreaterThanOrEqual(0)
            expect(b.remaining_s).toBeGreaterThanOrEqual(summarizeStability(plain).items[i]!.bands[j]!.remaining_s)
          })
        })
      }),
      RUNS,
    )
  })
})
