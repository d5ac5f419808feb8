import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'
import { autoIncrement } from './types.js'

/**
 * `GET /v1/epcis/events` (docs/interop.md, EPCIS): the custody events that are EPCIS events, in
 * the order recorded, with their delivery's tenant, so a tenant's page is read through its own
 * index (docs/security.md: a page costs the page, not a scan of other tenants' rows). Appended
 * with the custody event, in its transaction; the events recorded before this step are copied in.
 */
const EPCIS_CUSTODY_TYPES = ['picked_up', 'handoff', 'delivered', 'returned']

export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('epcis_events')
    .addColumn('pos', autoIncrement(dialect), (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('pharmacy_id', 'text', (c) => c.notNull())
    .addColumn('fleet_id', 'text')
    .addColumn('recorded_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('epcis_events_custody').on('epcis_events').columns(['delivery_id', 'seq']).unique().execute()
  await db.schema.createIndex('epcis_events_pharmacy').on('epcis_events').columns(['pharmacy_id', 'pos']).execute()
  await db.schema.createIndex('epcis_events_fleet').on('epcis_events').columns(['fleet_id', 'pos']).execute()
  await db
    .insertInto('epcis_events')
    .columns(['delivery_id', 'seq', 'pharmacy_id', 'fleet_id', 'recorded_at'])
    .expression(
      db
        .selectFrom('custody_events as c')
        .innerJoin('deliveries as d', 'd.id', 'c.delivery_id')
        .select(['c.delivery_id', 'c.seq', 'd.pharmacy_id', 'd.fleet_id', 'c.recorded_at'])
        .where('c.type', 'in', EPCIS_CUSTODY_TYPES)
        .orderBy('c.recorded_at')
        .orderBy('c.delivery_id')
        .orderBy('c.seq'),
    )
    .execute()
}
