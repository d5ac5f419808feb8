import { sql, type Kysely } from 'kysely'

/**
 * A driver user sees only the deliveries assigned to them (docs/api.md, Tenancy): their list of
 * deliveries and their event feed ask "which deliveries are this driver's now", which without
 * this index reads every delivery of the deployment. Partial: a queued delivery has no driver.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createIndex('deliveries_driver')
    .on('deliveries')
    .columns(['driver_id', 'id'])
    .where(sql.ref('driver_id'), 'is not', null)
    .execute()
}
