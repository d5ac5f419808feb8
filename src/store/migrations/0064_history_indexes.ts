import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Two reads that grew with the years of history a store keeps (bench:history, docs/performance.md):
 *
 * - The attention queue orders by (attention, id DESC). The indexes of 0012 hold (attention, id)
 *   ascending, so neither SQLite nor PostgreSQL can read them in that order: both sorted the whole
 *   "everything else" group (every ended delivery of the tenant, or of the deployment) to return
 *   its first 50. An index in the query's own order is read from its first entry and stops at the
 *   page's end. They replace the old ones: no write pays for an extra index.
 * - A delivery's events (`GET /v1/events?delivery_id=`, and a driver's feed, which asks for the
 *   events of the deliveries assigned to them) had no index on delivery_id beyond the partial
 *   dedupe one (rule events only): each read scanned every event ever written. The index follows
 *   the feed's order, (txid, pos) on PostgreSQL and pos on SQLite (event-cursor.ts), and leaves out
 *   the events of no delivery.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  await db.schema.dropIndex('deliveries_attention').execute()
  await db.schema.dropIndex('deliveries_pharmacy_attention').execute()
  await sql`create index deliveries_attention on deliveries (attention, id desc)`.execute(db)
  await sql`create index deliveries_pharmacy_attention on deliveries (pharmacy_id, attention, id desc)`.execute(db)
  const order = dialect === 'postgres' ? sql`txid, pos` : sql`pos`
  await sql`create index events_delivery on events (delivery_id, ${order}) where delivery_id is not null`.execute(db)
}
