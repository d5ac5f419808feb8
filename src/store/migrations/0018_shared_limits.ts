import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * The counters behind the throttles and rate limits, kept where every copy of the service sees
 * them (docs/security.md, Limits across copies): token buckets (per client, tenant, address)
 * and failed sign-ins (per account, per address). Only PostgreSQL uses them: on SQLite one
 * process serves, and its memory is the shared store.
 */
export async function up(db: Kysely<any>, dialect: Dialect): Promise<void> {
  if (dialect !== 'postgres') return
  await db.schema
    .createTable('rate_limit_buckets')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('rps', 'double precision', (c) => c.notNull())
    .addColumn('burst', 'double precision', (c) => c.notNull())
    .addColumn('tokens', 'double precision', (c) => c.notNull())
    .addColumn('granted', 'integer', (c) => c.notNull())
    .addColumn('updated_ms', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema
    .createTable('sign_in_failures')
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('at_ms', 'bigint', (c) => c.notNull())
    .execute()
  await db.schema.createIndex('sign_in_failures_key').on('sign_in_failures').columns(['key', 'at_ms']).execute()
  await db.schema.createIndex('sign_in_failures_at').on('sign_in_failures').column('at_ms').execute()
}
