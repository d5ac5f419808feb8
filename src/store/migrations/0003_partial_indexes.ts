import { sql, type Kysely } from 'kysely'

/**
 * Two indexes only ever searched for non-null keys now skip the rows whose key is null, so
 * creating a prescription touches two index pages fewer: most events carry no dedupe key (only
 * rule events do), and a new delivery has no tote yet. Every query on them names a non-null
 * value (`dedupe_key = ?`, `tote_id = ?` / `in (…)`), which SQLite and PostgreSQL both accept
 * as implying the index's condition. Uniqueness is unchanged: null keys never collided.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_dedupe').execute()
  await db.schema
    .createIndex('events_dedupe')
    .on('events')
    .columns(['delivery_id', 'dedupe_key'])
    .unique()
    .where(sql.ref('dedupe_key'), 'is not', null)
    .execute()
  await db.schema.dropIndex('deliveries_tote').execute()
  await db.schema
    .createIndex('deliveries_tote')
    .on('deliveries')
    .columns(['tote_id', 'bound_from'])
    .where(sql.ref('tote_id'), 'is not', null)
    .execute()
}
