import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A product stability version's e-signature is its own record in the audit chain (docs/part11.md):
 * the record keeps the signature as JSON, covered by its hash. Every other record has none.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('audit_events').addColumn('signature', 'text').execute()
}
