import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Signed excursion assessments (docs/stability.md, docs/part11.md): the pharmacist's e-signature
 * of the assessment, and of its withdrawal, kept with the row as JSON. Older rows have none.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('stability_assessments').addColumn('signature', 'text').execute()
  await db.schema.alterTable('stability_assessments').addColumn('withdrawal_signature', 'text').execute()
}
