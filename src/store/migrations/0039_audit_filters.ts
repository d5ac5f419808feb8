import type { Kysely } from 'kysely'

/**
 * What an audit review filters by besides the person and the time: the operation a request ran
 * (its OpenAPI operationId) and the delivery it concerned. Records written before carry neither,
 * and are not filled in: the chain's hashes cover what a record held when it was written.
 * No new index: a tenant's review reads its own records by (pharmacy_id, pos) and filters those,
 * and every write request now pays for each index of this table before it is answered.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('audit_events').addColumn('action', 'text').execute()
  await db.schema.alterTable('audit_events').addColumn('delivery_id', 'text').execute()
}
