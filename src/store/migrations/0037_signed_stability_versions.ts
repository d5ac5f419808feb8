import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/** A stability version added by a person is signed (meaning `approved`, docs/part11.md); the signature is kept with it. */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('product_stability_versions').addColumn('signature', 'text').execute()
}
