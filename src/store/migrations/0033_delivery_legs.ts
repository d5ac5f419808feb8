import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Legs of a prescription (docs/stability.md, Redelivery): a returned and released delivery sent out
 * again is a new delivery of the same prescription, `leg` n + 1. Existing deliveries are leg 1. One
 * delivery per prescription and leg: two concurrent redeliveries cannot both become leg 2.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('deliveries')
    .addColumn('leg', 'integer', (c) => c.notNull().defaultTo(1))
    .execute()
  await db.schema.createIndex('deliveries_rx_leg').on('deliveries').columns(['rx_id', 'leg']).unique().execute()
}
