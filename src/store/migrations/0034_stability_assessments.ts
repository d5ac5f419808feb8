import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Excursion assessments (docs/stability.md): a pharmacist gives budget back to one band of one item
 * of a delivery, with a justification. Rows are never deleted: a withdrawal stamps `withdrawn_at`,
 * so the record of what was given and taken back stays.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('stability_assessments')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('ndc', 'text', (c) => c.notNull())
    .addColumn('band', 'integer', (c) => c.notNull())
    .addColumn('add_back_s', 'integer', (c) => c.notNull())
    .addColumn('justification', 'text', (c) => c.notNull())
    .addColumn('assessed_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('withdrawn_by', 'text')
    .addColumn('withdrawn_at', 'text')
    .execute()
  await db.schema.createIndex('stability_assessments_delivery').on('stability_assessments').column('delivery_id').execute()
}
