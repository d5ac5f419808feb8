import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Tote credentials on their way to an external MQTT broker (src/mqtt/README.md): a row per
 * registered tote whose account the broker does not have yet. The password is sealed with a key
 * derived from the service's own broker password (never kept in the clear, never in this
 * database), and the row is deleted once the broker has the account.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('broker_accounts')
    .addColumn('tote_id', 'text', (c) => c.primaryKey())
    .addColumn('sealed_password', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('last_error', 'text')
    .addColumn('created_at', 'text', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('broker_accounts_due').on('broker_accounts').column('next_attempt_at').execute()
}
