import { sql, type Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * The pharmacist's attention queue (docs/console.md): a delivery's rank, derived by the database
 * from the row itself so no writer can forget it — 0 a BROKEN cold chain nobody has decided on,
 * 1 an open EXCURSION, 2 everything else (a decided break included). The list endpoint orders by
 * (attention, id desc) within a tenant, on an index, so the queue's first page reads a handful
 * of rows however many deliveries a pharmacy has.
 *
 * SQLite: a VIRTUAL generated column (the only kind ALTER TABLE can add), indexable.
 * PostgreSQL: a STORED generated column (PostgreSQL 12+); `cold_chain` is JSON as text.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  const state = dialect === 'postgres' ? sql`(cold_chain::jsonb ->> 'state')` : sql`json_extract(cold_chain, '$.state')`
  const undecided = sql`(disposition is null or disposition = 'null')`
  const rank = sql`case when ${state} = 'BROKEN' and ${undecided} then 0 when ${state} = 'EXCURSION' then 1 else 2 end`
  if (dialect === 'postgres') {
    await sql`alter table deliveries add column attention smallint generated always as (${rank}) stored`.execute(db)
  } else {
    await sql`alter table deliveries add column attention integer generated always as (${rank}) virtual`.execute(db)
  }
  await db.schema.createIndex('deliveries_pharmacy_attention').on('deliveries').columns(['pharmacy_id', 'attention', 'id']).execute()
  await db.schema.createIndex('deliveries_attention').on('deliveries').columns(['attention', 'id']).execute()
}
