import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A pharmacy's GS1 Global Location Number (docs/interop.md, EPCIS): optional, so its EPCIS events
 * name it as an SGLN; pharmacies without one are named by their URL.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('pharmacies').addColumn('gln', 'text').execute()
}
