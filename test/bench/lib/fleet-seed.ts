import type { Db } from '../../../src/store/schema.js'
import { mulberry32 } from '../../../test/helpers/prng.js'

const STATUSES = ['DELIVERED', 'DELIVERED', 'DELIVERED', 'FAILED', 'RETURNED'] as const

/**
 * Writes `count` ended deliveries of `fleetId` straight into the entity store (the rows a dispatch
 * and an end would leave), their ends spread over [fromMs, toMs), and two rate card versions.
 * For benchmarks and property tests of the reconciliation, where going through the API for each
 * delivery would measure the API instead.
 */
export async function seedEndedDeliveries(
  db: Db,
  opts: { fleetId: string; pharmacyId: string; count: number; fromMs: number; toMs: number; seed?: number },
): Promise<void> {
  const random = mulberry32(opts.seed ?? 1) // the same deliveries every run
  const at = new Date(opts.fromMs).toISOString()
  await db
    .insertInto('rate_cards')
    .values(
      [1, 2].map((version) => ({
        fleet_id: opts.fleetId,
        version,
        currency: 'USD',
        base_fee_cents: 600 + version * 25,
        per_km_cents: 85,
        cold_chain_surcharge_cents: 300,
        failed_attempt_fee_cents: 400,
        after_hours_multiplier_e4: 15_000,
        commission_bps: 1_150 + version,
        effective_from: at,
        created_at: at,
        created_by: 'cl_seed',
      })),
    )
    .execute()
  const CHUNK = 500 // well under SQLite's 32,766 bound parameters per statement
  for (let start = 0; start < opts.count; start += CHUNK) {
    const rows = []
    for (let i = start; i < Math.min(opts.count, start + CHUNK); i++) {
      const endedMs = opts.fromMs + Math.floor(random() * (opts.toMs - opts.fromMs))
      const ended = new Date(endedMs).toISOString()
      const status = STATUSES[Math.floor(random() * STATUSES.length)]!
      const id = `dl_seed${String(i).padStart(10, '0')}`
      rows.push({
        id,
        rx_id: `rx_seed${String(i).padStart(10, '0')}`,
        pharmacy_id: opts.pharmacyId,
        status,
        eta: ended,
        fleet_id: opts.fleetId,
        driver_id: null,
        tote_id: null,
        cold_chain_required: random() < 0.3 ? 1 : 0,
        profile: null,
        cold_chain: null,
        disposition: null,
        bound_from: null,
        bound_to: null,
        version: 4,
        event_seq: 0,
        created_at: ended,
        updated_at: ended,
        rate_card_version: random() < 0.02 ? null : 1 + Math.floor(random() * 2),
        ended_at: ended,
        distance_m: random() < 0.1 ? null : Math.floor(random() * 25_000),
        after_hours: random() < 0.2 ? 1 : 0,
        on_time: status === 'DELIVERED' ? (random() < 0.9 ? 1 : 0) : null,
        leg: 1,
      })
    }
    await db.insertInto('deliveries').values(rows).execute()
  }
}
