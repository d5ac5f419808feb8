import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A tote's serial is unique within its owner (pharmacy or fleet), no longer across the whole
 * deployment: a deployment-wide constraint answered one tenant's registration with 409 because
 * of another tenant's tote, which told it that the other tote exists.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  if (dialect === 'postgres') {
    await sql`alter table totes drop constraint if exists totes_serial_key`.execute(db)
  } else {
    await rebuildSqliteTotesWithoutSerialUnique(db)
  }
  // Exactly one of pharmacy_id and fleet_id is set (the API requires one owner).
  await sql`create unique index totes_owner_serial on totes (coalesce(pharmacy_id, fleet_id), serial)`.execute(db)
  await db.schema.createIndex('audit_events_client').on('audit_events').columns(['client_id', 'pos']).execute()
}

/** SQLite cannot drop a column's UNIQUE: copy into a table without it, keeping any other index. */
async function rebuildSqliteTotesWithoutSerialUnique(db: Kysely<any>): Promise<void> {
  const { rows: indexes } = await sql<{
    sql: string
  }>`select sql from sqlite_master where type = 'index' and tbl_name = 'totes' and sql is not null`.execute(db)
  await db.schema
    .createTable('totes_rebuilt')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('serial', 'text', (c) => c.notNull())
    .addColumn('pharmacy_id', 'text')
    .addColumn('fleet_id', 'text')
    .addColumn('mqtt_password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await sql`insert into totes_rebuilt (id, serial, pharmacy_id, fleet_id, mqtt_password_hash, created_at)
    select id, serial, pharmacy_id, fleet_id, mqtt_password_hash, created_at from totes`.execute(db)
  await db.schema.dropTable('totes').execute()
  await db.schema.alterTable('totes_rebuilt').renameTo('totes').execute()
  for (const index of indexes) await sql.raw(index.sql).execute(db)
}
