import { sql, type Kysely } from 'kysely'

/**
 * A fleet's deliveries, events and audit records are read only by that fleet (`fleet_id = ?`),
 * never as the rows of no fleet. Most rows have none: every delivery until it is assigned, every
 * event and audit record of a pharmacy's own requests. Their index entries were written by every
 * create and never read; a partial index leaves them out (each `fleet_id = ?` implies the index's
 * condition, so SQLite and PostgreSQL still use it).
 */
export async function up(db: Kysely<any>): Promise<void> {
  for (const [index, table, order] of [
    ['deliveries_fleet', 'deliveries', 'id'],
    ['events_fleet', 'events', 'pos'],
    ['audit_events_fleet', 'audit_events', 'pos'],
  ] as const) {
    await db.schema.dropIndex(index).execute()
    await sql`create index ${sql.id(index)} on ${sql.table(table)} (fleet_id, ${sql.ref(order)}) where fleet_id is not null`.execute(db)
  }
}
