// The stability budget ledger's charging rules, one behaviour at a time.
import { describe, expect, it } from 'vitest'
import {
  chargeReadings,
  nextLeg,
  openLedger,
  summarizeStability,
  type ItemStability,
  type ProductStability,
  type StabilityEvent,
} from '../../rules/index.js'
import { at, iso, readings } from './helpers.js'

/** A refrigerated biologic: 2–8 °C, 8–15 °C for 1 h, 15–25 °C for 10 min, 0–2 °C for 30 min. */
const insulin: ProductStability = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [
    { min_c: 8, max_c: 15, allowed_s: 3600 },
    { min_c: 15, max_c: 25, allowed_s: 600 },
    { min_c: 0, max_c: 2, allowed_s: 1800 },
  ],
  freeze_thaw_max: 1,
  hard_min_c: -5,
  hard_max_c: 30,
  source: 'Label, section 16.2',
}
const item = (stability: ProductStability = insulin, ndc = '00002-8215-01'): ItemStability => ({
  ndc,
  product_id: 'pr_1',
  version: 1,
  stability,
})

function ledgerOf(points: [number, number][], { maxGapS = 900 as number | null, stability = insulin } = {}) {
  const events: StabilityEvent[] = []
  const { ledger } = chargeReadings(openLedger([item(stability)], maxGapS), readings(...points), events)
  return { ledger, events, summary: summarizeStability(ledger, ['dl_1']) }
}

const consumed = (summary: ReturnType<typeof ledgerOf>['summary']) => summary.items[0]!.bands.map((b) => b.consumed_s)

describe('the stability ledger', () => {
  it('charges each interval at the earlier reading’s temperature', () => {
    const { summary } = ledgerOf([
      [0, 5],
      [10, 12], // storage for 10 min
      [20, 5], // 8–15 band for 10 min
      [25, 1], // storage 5 min
      [30, 5], // 0–2 band 5 min
    ])
    expect(consumed(summary)).toEqual([600, 0, 300])
    expect(summary.items[0]!.bands[0]!.remaining_s).toBe(3000)
    expect(summary.items[0]!.verdict).toBe('within')
  })

  it('puts a temperature on a shared endpoint in the range nearer storage, storage itself first', () => {
    const { summary } = ledgerOf([
      [0, 8], // storage (8 is storage's max and band 1's min)
      [10, 15], // band 1 (15 is band 1's max and band 2's min)
      [20, 2], // storage
      [30, 5],
    ])
    expect(consumed(summary)).toEqual([600, 0, 0])
    expect(summary.items[0]!.bands[0]!.consumed_s).toBe(600)
  })

  it('charges unknown time beyond max_gap_s to the neighbour further from storage', () => {
    // 5 °C, then 40 minutes of silence, then 20 °C: 15 min known at 5 °C, 25 min unknown charged to 15–25.
    const { summary, ledger } = ledgerOf([
      [0, 5],
      [40, 20],
    ])
    expect(ledger.items[0]!.storage_ms).toBe(15 * 60_000)
    expect(consumed(summary)).toEqual([0, 1500, 0])
    expect(summary.items[0]!.verdict).toBe('exhausted')
    expect(summary.items[0]!.exhausted_reason).toBe('band_budget')
    // 15 min known + 10 min allowed in the 15–25 band.
    expect(summary.items[0]!.exhausted_at).toBe(iso(25))
  })

  it('charges a gap between two in-storage readings to storage', () => {
    const { ledger } = ledgerOf([
      [0, 5],
      [120, 6],
    ])
    expect(ledger.items[0]!.storage_ms).toBe(120 * 60_000)
  })

  it('exhausts an item at once when a reading is in no band outside storage', () => {
    const { summary, events } = ledgerOf([
      [0, 5],
      [10, 27], // above every band, below hard_max_c
      [11, 5],
    ])
    expect(summary.items[0]!.exhausted_reason).toBe('outside_bands')
    expect(summary.items[0]!.exhausted_at).toBe(iso(10))
    expect(events.filter((e) => e.type === 'stability.exhausted')).toHaveLength(1)
    expect(summary.remaining_fraction).toBe(0)
  })

  it('exhausts on a hard limit at the reading', () => {
    const { summary, events } = ledgerOf([
      [0, 5],
      [3, -6],
    ])
    expect(summary.items[0]!.exhausted_reason).toBe('hard_limit')
    expect(events).toEqual([
      expect.objectContaining({ type: 'stability.exhausted', at: at(3), data: expect.objectContaining({ temp_c: -6 }) }),
    ])
  })

  it('counts freeze-thaw cycles and exhausts past freeze_thaw_max', () => {
    const withFreezer: ProductStability = { ...insulin, budgets: [...insulin.budgets, { min_c: -5, max_c: 0, allowed_s: 86_400 }] }
    const { summary } = ledgerOf(
      [
        [0, 5],
        [1, -1],
        [2, 1], // cycle 1: allowed
        [3, -1],
        [4, 0], // cycle 2: back to 0 °C counts, one too many
      ],
      { stability: withFreezer },
    )
    expect(summary.items[0]!.freeze_thaw).toEqual({ count: 2, max: 1 })
    expect(summary.items[0]!.exhausted_reason).toBe('freeze_thaw')
    expect(summary.items[0]!.exhausted_at).toBe(iso(4))
  })

  it('warns once per band when remaining falls below 20 %, then exhausts when consumed exceeds the allowance', () => {
    const { events, summary } = ledgerOf([
      [0, 20],
      [5, 20],
      [9, 20], // 9 min of 10 in the 15–25 band: low at 8 min
      [10, 20], // exactly the allowance: still within
    ])
    expect(events).toEqual([expect.objectContaining({ type: 'stability.budget-low', at: at(8), key: 'budget-low:0:1' })])
    expect(summary.items[0]!.verdict).toBe('within')
    expect(summary.items[0]!.bands[1]!.remaining_s).toBe(0)

    const more = chargeReadings(
      structuredClone(
        ledgerOf([
          [0, 20],
          [10, 20],
        ]).ledger,
      ),
      readings([11, 5]),
    )
    expect(more.events.map((e) => [e.type, e.at])).toEqual([['stability.exhausted', at(10)]])
  })

  it('judges every item against its own product', () => {
    const roomTemp: ProductStability = {
      storage: { min_c: 15, max_c: 25 },
      budgets: [{ min_c: 25, max_c: 30, allowed_s: 86_400 }],
      freeze_thaw_max: null,
      source: 'USP <659>',
    }
    const { ledger } = chargeReadings(openLedger([item(insulin), item(roomTemp, '00000-1111-22')], 900), readings([0, 20], [30, 20]))
    const summary = summarizeStability(ledger, ['dl_1'])
    expect(summary.items.map((i) => i.verdict)).toEqual(['exhausted', 'within'])
    expect(summary.items[1]!.bands[0]!.consumed_s).toBe(0)
  })

  it('starts a redelivery from what earlier legs consumed, without charging the time between legs', () => {
    const leg1 = ledgerOf([
      [0, 12],
      [20, 5],
    ]).ledger
    const leg2 = chargeReadings(nextLeg(leg1), readings([600, 12], [620, 5])).ledger
    expect(leg2.leg).toBe(2)
    expect(summarizeStability(leg2, ['dl_1', 'dl_2']).items[0]!.bands[0]!.consumed_s).toBe(2400)
    expect(leg2.items[0]!.storage_ms).toBe(0)
  })

  it('gives back budget from assessments', () => {
    const { ledger } = chargeReadings(
      openLedger([item()], 900, [{ ndc: '00002-8215-01', band: 1, add_back_s: 600 }]),
      readings([0, 20], [15, 5]),
    )
    const band = summarizeStability(ledger, ['dl_1']).items[0]!.bands[1]!
    expect(band).toMatchObject({ allowed_s: 600, add_back_s: 600, consumed_s: 900, remaining_s: 300 })
    expect(ledger.items[0]!.exhausted).toBeNull()
  })
})
