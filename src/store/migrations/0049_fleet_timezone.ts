import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A fleet's `timezone` (IANA): the embedded dashboard shows its dispatchers local times in it.
 * Fleets registered before keep UTC, which is what their dashboard showed, until they set one.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('fleets')
    .addColumn('timezone', 'text', (c) => c.notNull().defaultTo('UTC'))
    .execute()
}
