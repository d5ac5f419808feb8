import type { Kysely } from 'kysely'

/**
 * What an audit review filters by besides the person and the time: the operation a request ran
 * (its OpenAPI operationId) and the delivery it concerned. Records written before carry neither,
 * and are not filled in: the chain's hashes cover what a record held when it was written.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('audit_events').addColumn('action', 'text').execute()
  await db.schema.alterTable('audit_events').addColumn('delivery_id', 'text').execute()
  await db.schema.createIndex('audit_events_delivery').on('audit_events').columns(['delivery_id', 'pos']).execute()
}
