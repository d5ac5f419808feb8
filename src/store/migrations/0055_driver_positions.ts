import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { autoIncrement } from './types.js'

/**
 * Live location and ETA (docs/fleet.md): the positions drivers post, kept per delivery in
 * progress and deleted in small batches once the delivery has been over for the retention
 * (POSITION_RETENTION_DAYS); each delivery's ETA state (the ETA it follows, what was last
 * announced, whether `delivery.arriving` went out); a fleet's average speed; and the delivery's
 * live ETA, which its `eta` shows while set (the promised one stays in `eta` for on-time pricing).
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('driver_positions')
    .addColumn('id', autoIncrement(dialect), (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('driver_id', 'text', (c) => c.notNull())
    .addColumn('lat', 'double precision', (c) => c.notNull())
    .addColumn('lng', 'double precision', (c) => c.notNull())
    .addColumn('accuracy_m', 'double precision', (c) => c.notNull())
    .addColumn('at', 'text', (c) => c.notNull())
    .addColumn('recorded_at', 'text', (c) => c.notNull())
    .execute()
  // One position per delivery and instant: an app re-sending a batch (or MQTT's at-least-once) stores it once.
  await db.schema.createIndex('driver_positions_delivery_at').on('driver_positions').columns(['delivery_id', 'at']).unique().execute()
  await db.schema
    .createTable('delivery_etas')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    .addColumn('position_at', 'text')
    .addColumn('distance_m', 'double precision')
    .addColumn('router_eta', 'text')
    .addColumn('router_until', 'text')
    .addColumn('announced_eta', 'text', (c) => c.notNull())
    .addColumn('announced_at', 'text')
    .addColumn('arriving_at', 'text')
    .execute()
  await db.schema
    .alterTable('fleets')
    .addColumn('average_speed_kmh', 'double precision', (c) => c.notNull().defaultTo(25))
    .execute()
  await db.schema.alterTable('deliveries').addColumn('live_eta', 'text').execute()
}
