import type { Db } from '../store/schema.js'
import { judgedProfile } from './judged-profile.js'
import type { Binding } from './bindings.js'

/** Cold-chain deliveries with a tote bound right now: the ones whose sensors must be heard. */
export async function openColdChainBindings(db: Db): Promise<{ toteId: string; binding: Binding }[]> {
  const rows = await db
    .selectFrom('deliveries')
    .leftJoin('delivery_stability', 'delivery_stability.delivery_id', 'deliveries.id')
    .select(['id', 'rx_id', 'pharmacy_id', 'fleet_id', 'profile', 'tote_id', 'bound_from', 'delivery_stability.plan'])
    .where('cold_chain_required', '=', 1)
    .where('tote_id', 'is not', null)
    .where('bound_to', 'is', null)
    .execute()
  return rows.map((row) => ({
    toteId: row.tote_id!,
    binding: {
      deliveryId: row.id,
      rxId: row.rx_id,
      pharmacyId: row.pharmacy_id,
      fleetId: row.fleet_id,
      profile: judgedProfile(row.profile!, row.plan),
      fromMs: Date.parse(row.bound_from!),
      toMs: null,
    },
  }))
}
