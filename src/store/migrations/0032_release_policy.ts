import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Release by stability budget (docs/stability.md): each pharmacy's `release_policy`. Pharmacies
 * registered before this step keep `manual` (every break waits for a person, as they agreed to);
 * the service gives new ones `auto_within_budget`. A delivered delivery released by the rule
 * records it in `release`.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('pharmacies')
    .addColumn('release_policy', 'text', (c) => c.notNull().defaultTo('manual'))
    .execute()
  await db.schema.alterTable('deliveries').addColumn('release', 'text').execute()
}
