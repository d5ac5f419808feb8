import type { Kysely } from 'kysely'

/**
 * Indexes that keep per-tenant work proportional to the tenant, not to the deployment:
 * - counting a tenant's clients, totes and webhook endpoints before creating one more (the
 *   per-tenant limits) reads only that tenant's index entries;
 * - a fleet's events
 *   (`fleet_id = ? order by pos`) and a fleet's deliveries (`fleet_id = ? order by id`) are
 *   read a page at a time from an index instead of scanning the whole table for them.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('oauth_clients_pharmacy').on('oauth_clients').column('pharmacy_id').execute()
  await db.schema.createIndex('oauth_clients_fleet').on('oauth_clients').column('fleet_id').execute()
  await db.schema.createIndex('totes_pharmacy').on('totes').columns(['pharmacy_id', 'id']).execute()
  await db.schema.createIndex('totes_fleet').on('totes').columns(['fleet_id', 'id']).execute()
  await db.schema.createIndex('webhook_endpoints_pharmacy').on('webhook_endpoints').column('pharmacy_id').execute()
  await db.schema.createIndex('webhook_endpoints_fleet').on('webhook_endpoints').column('fleet_id').execute()
  await db.schema.createIndex('events_fleet').on('events').columns(['fleet_id', 'pos']).execute()
  await db.schema.createIndex('deliveries_fleet').on('deliveries').columns(['fleet_id', 'id']).execute()
}
