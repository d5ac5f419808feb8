import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * `GET /v1/epcis/events` reads custody events in record-time order (EPCIS recordTime), paged by
 * (recorded_at, delivery_id, seq): this index walks them in that order without a sort.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.createIndex('custody_events_record_time').on('custody_events').columns(['recorded_at', 'delivery_id', 'seq']).execute()
}
