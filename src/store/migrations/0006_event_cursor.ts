import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * The event cursor in commit order on PostgreSQL (see events/event-cursor.ts): each event
 * keeps the id of the transaction that wrote it (`xid8`, never wraps around), and lists read in
 * (txid, pos) order. Events written before this step all get this step's transaction id, so they
 * keep their order, before any later event. SQLite has one writer at a time: its positions are
 * already in commit order, and it needs nothing.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  await sql`alter table events add column txid xid8 not null default pg_current_xact_id()`.execute(db)
  await sql`create index events_txid on events (txid, pos)`.execute(db)
  // A pharmacy's feed reads its own events in the same order.
  await db.schema.dropIndex('events_pharmacy').execute()
  await sql`create index events_pharmacy on events (pharmacy_id, txid, pos)`.execute(db)
}
