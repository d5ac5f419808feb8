import type { Kysely } from 'kysely'

/**
 * Each audit record names the tenant (pharmacy or fleet) of the token that made the request, so
 * a restricted token reads its tenant's records, whoever made them and through whichever app,
 * rather than its client's: one app can sign in people of several pharmacies. Records written
 * before carry none and are not filled in: the chain's hashes cover what a record held when it
 * was written, so they are shown to unrestricted tokens only.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('audit_events').addColumn('pharmacy_id', 'text').execute()
  await db.schema.alterTable('audit_events').addColumn('fleet_id', 'text').execute()
  await db.schema.createIndex('audit_events_pharmacy').on('audit_events').columns(['pharmacy_id', 'pos']).execute()
  await db.schema.createIndex('audit_events_fleet').on('audit_events').columns(['fleet_id', 'pos']).execute()
}
