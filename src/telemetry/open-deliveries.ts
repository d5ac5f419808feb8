import type { Db } from '../store/schema.js'
import { selectBindings, toBinding, type Binding } from './bindings.js'

/**
 * Cold-chain deliveries with a tote bound right now: the ones whose sensors must be heard. On
 * PostgreSQL every column read is in `deliveries_open_bindings` (migration 0066), so the read is
 * an index-only scan whatever the planner estimates.
 */
export async function openColdChainBindings(db: Db): Promise<{ toteId: string; binding: Binding }[]> {
  const rows = await selectBindings(db)
    .where('cold_chain_required', '=', 1)
    .where('tote_id', 'is not', null)
    .where('bound_to', 'is', null)
    .execute()
  return rows.map((row) => ({ toteId: row.tote_id!, binding: toBinding(row) }))
}
