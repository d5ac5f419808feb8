import { sql, type Kysely } from 'kysely'

/**
 * The open cold-chain deliveries, which the rule engine re-reads every 5 s
 * (telemetry/open-deliveries.ts). 0001's partial unique index (deliveries_open_tote) holds exactly the open bound
 * deliveries, but SQLite's planner, without statistics, ranged over `deliveries_tote` instead:
 * every delivery that ever had a tote, 0.7–1.2 s a read on bench:history's year. An index led by
 * the query's one equality is the one it picks; it holds only open deliveries, so it stays tiny.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index deliveries_open_cold_chain on deliveries (cold_chain_required, tote_id)
    where bound_to is null and tote_id is not null`.execute(db)
}
