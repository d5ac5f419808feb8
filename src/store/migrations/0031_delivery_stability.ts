import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * What a cold-chain delivery's items are judged by (docs/stability.md): the product stability
 * versions in force when the prescription was created, written once with the delivery and never
 * changed, so a later product change cannot rewrite a delivery already judged.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('delivery_stability')
    .addColumn('delivery_id', 'text', (c) => c.primaryKey())
    .addColumn('plan', 'text', (c) => c.notNull())
    .execute()
}
