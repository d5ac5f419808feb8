import { fc, test } from '@fast-check/vitest'
import { afterAll, beforeAll, describe, expect } from 'vitest'
import { seedEndedDeliveries } from '../bench/lib/fleet-seed.js'
import { divideHalfEven, priceLine } from '../../src/domain/pricing.js'
import { PeriodReader, type ReconciliationLine, type Totals } from '../../src/services/reconciliation.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * The rounding rule holds the totals together: any split of a period into sub-periods gives
 * lines and totals that add up to the whole period's, to the cent.
 */

const FROM = Date.parse('2026-11-01T00:00:00.000Z')
const TO = Date.parse('2026-12-01T00:00:00.000Z')
const AMOUNTS = [
  'base_cents',
  'distance_cents',
  'cold_chain_cents',
  'failed_attempt_cents',
  'after_hours_cents',
  'gross_cents',
  'commission_cents',
  'payout_cents',
] as const

describe('reconciliation over split periods', () => {
  let api: TestApi
  const fleetId = 'fl_split'
  beforeAll(async () => {
    api = await startTestService()
    await seedEndedDeliveries(api.service.db, { fleetId, pharmacyId: 'ph_split', count: 600, fromMs: FROM, toMs: TO, seed: 7 })
  })
  afterAll(() => api?.stop())

  async function read(from: number, to: number): Promise<{ lines: ReconciliationLine[]; totals: Totals }> {
    const reader = new PeriodReader(api.service.db, fleetId, { from: new Date(from).toISOString(), to: new Date(to).toISOString() })
    const lines: ReconciliationLine[] = []
    for await (const line of reader.lines()) lines.push(line)
    return { lines, totals: reader.totals }
  }

  // A cut anywhere, or exactly on a delivery's end (where an inclusive bound would count it twice).
  const cut = fc.record({ at: fc.integer({ min: FROM + 1, max: TO - 1 }), onALine: fc.boolean() })

  test.prop([fc.array(cut, { maxLength: 8 })], { numRuns: 40 })('any split sums to the whole', async (cuts) => {
    const whole = await read(FROM, TO)
    expect(whole.totals.lines).toBe(600)
    const endOfLineNear = (at: number) => Date.parse(whole.lines[Math.floor(((at - FROM) / (TO - FROM)) * whole.lines.length)]!.ended_at)
    const points = [...new Set(cuts.map((c) => (c.onALine ? endOfLineNear(c.at) : c.at)))].filter((t) => t > FROM && t < TO)
    const bounds = [FROM, ...points.sort((a, b) => a - b), TO]
    const parts = []
    for (let i = 0; i + 1 < bounds.length; i++) parts.push(await read(bounds[i]!, bounds[i + 1]!))
    expect(parts.flatMap((p) => p.lines)).toEqual(whole.lines)
    for (const name of [...AMOUNTS, 'lines'] as const) {
      expect(parts.reduce((sum, p) => sum + p.totals[name], 0)).toBe(whole.totals[name])
      if (name !== 'lines') expect(whole.lines.reduce((sum, l) => sum + l[name], 0)).toBe(whole.totals[name])
    }
  })

  test.prop([fc.nat({ max: 1e9 }), fc.integer({ min: 1, max: 1e6 })])('divideHalfEven rounds to nearest, ties to even', (n, d) => {
    const q = divideHalfEven(n, d)
    const exact = BigInt(n) * 2n
    // |2n − 2qd| ≤ d, and on a tie the quotient is even.
    const diff = exact - 2n * BigInt(q) * BigInt(d)
    expect(diff <= BigInt(d) && diff >= -BigInt(d)).toBe(true)
    if (diff === BigInt(d) || diff === -BigInt(d)) expect(q % 2).toBe(0)
  })

  test.prop([
    fc.record({
      base_fee_cents: fc.nat({ max: 1e7 }),
      per_km_cents: fc.nat({ max: 1e5 }),
      cold_chain_surcharge_cents: fc.nat({ max: 1e7 }),
      failed_attempt_fee_cents: fc.nat({ max: 1e7 }),
      after_hours_multiplier_e4: fc.integer({ min: 10_000, max: 100_000 }),
      commission_bps: fc.nat({ max: 10_000 }),
    }),
    fc.record({
      outcome: fc.constantFrom('delivered' as const, 'failed' as const),
      cold_chain: fc.boolean(),
      distance_m: fc.option(fc.nat({ max: 2e7 })),
      after_hours: fc.boolean(),
    }),
  ])('a line is whole cents that add up: gross = parts, payout = gross − commission', (card, inputs) => {
    const line = priceLine(card, inputs)
    for (const name of AMOUNTS) expect(Number.isSafeInteger(line[name]) && line[name] >= 0, name).toBe(true)
    expect(line.gross_cents).toBe(
      line.base_cents + line.distance_cents + line.cold_chain_cents + line.failed_attempt_cents + line.after_hours_cents,
    )
    expect(line.payout_cents + line.commission_cents).toBe(line.gross_cents)
  })
})
