import { sql, type Kysely } from 'kysely'

/**
 * A tote's bindings that ended after a time (telemetry/bindings.ts reads the last week's for
 * every publishing tote, every 2 s). `deliveries_tote (tote_id, bound_from)` reaches them only by
 * reading every trip the tote ever made: ingest grew dearer with history. Ended bindings only;
 * the open one is `deliveries_open_tote`'s.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index deliveries_tote_ended on deliveries (tote_id, bound_to) where bound_to is not null`.execute(db)
}
