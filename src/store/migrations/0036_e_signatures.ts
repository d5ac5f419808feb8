import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * E-signatures (docs/part11.md): a signature enters the custody chain as its own `signed` event,
 * whose row keeps the signature beside the columns every event has. Older events have none.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('custody_events').addColumn('signature', 'text').execute()
}
