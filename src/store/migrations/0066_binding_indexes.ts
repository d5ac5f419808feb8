import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Reads of tote bindings that must cost the same with a year of history as with none (bench:history
 * on PostgreSQL found both):
 *
 * - A tote's bindings that ended after a time (telemetry/bindings.ts reads the last week's for
 *   every publishing tote, every 2 s): `deliveries_tote (tote_id, bound_from)` reaches them only
 *   through every trip the tote ever made. Ended bindings only; the open one is in the indexes of
 *   open deliveries.
 * - On PostgreSQL, the open cold-chain deliveries (telemetry/open-deliveries.ts, every 5 s and
 *   after each dispatch and end). The planner takes `bound_to is null` as 44 % of deliveries (every
 *   delivery without a tote has no binding end either), estimates 140,000 open cold-chain
 *   deliveries where there are a few, and walked `deliveries_bound_from` (every bound delivery
 *   ever: 0.3–0.5 s a read on the year) rather than fetch them through 0065's small index. An index
 *   holding every column the read needs is read alone (an index-only scan, cheap whatever the
 *   estimate), so it replaces 0065's there; `bound_to`, null in all of it, is there because the
 *   reads select it. SQLite's planner already reads 0065's.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  await sql`create index deliveries_tote_ended on deliveries (tote_id, bound_to) where bound_to is not null`.execute(db)
  if (dialect !== 'postgres') return
  await sql`create index deliveries_open_bindings on deliveries (cold_chain_required, tote_id)
    include (id, rx_id, pharmacy_id, fleet_id, profile, bound_from, bound_to)
    where bound_to is null and tote_id is not null`.execute(db)
  await sql`drop index deliveries_open_cold_chain`.execute(db)
}
