import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Products and their stability data (docs/stability.md): `products` by NDC, per pharmacy or for
 * every pharmacy (`owner_key` '*'), and `product_stability_versions`, one row per version, never
 * updated, the one in force at a time being the latest `effective_from` not after it.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('products')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('ndc', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('pharmacy_id', 'text')
    .addColumn('owner_key', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .execute()
  // One product per NDC and owner; also the lookup by NDC when a prescription is created.
  await db.schema.createIndex('products_ndc_owner').on('products').columns(['ndc', 'owner_key']).unique().execute()
  await db.schema
    .createTable('product_stability_versions')
    .addColumn('product_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('stability', 'text', (c) => c.notNull())
    .addColumn('effective_from', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    // One row per version: two concurrent PUTs cannot both take the same number.
    .addPrimaryKeyConstraint('product_stability_versions_pk', ['product_id', 'version'])
    .execute()
}
