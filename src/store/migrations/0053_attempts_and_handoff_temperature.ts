import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Attempts and the temperature at each handoff (docs/api.md, Attempts; docs/api.md, Temperature at each handoff):
 * the pharmacy's `max_attempts` (rows from before, and new ones, get 3: the first attempt and two
 * more), and two custody event members kept as JSON, each inside the event's hash and absent
 * (null here) on events written before: `temperature` on cold-chain deliveries, `attempt` on
 * `failed` and `reattempted` events.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .alterTable('pharmacies')
    .addColumn('max_attempts', 'integer', (c) => c.notNull().defaultTo(3))
    .execute()
  await db.schema.alterTable('custody_events').addColumn('temperature', 'text').execute()
  await db.schema.alterTable('custody_events').addColumn('attempt', 'text').execute()
}
