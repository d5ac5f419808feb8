import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Retention of what is not a record (docs/operations.md, Retention; store/record-expiry.ts): each
 * table the expirer trims gets an index on the time it is trimmed by, so a batch reads only what
 * it removes. Idempotency keys were purged by `expires_at` with no index: a scan every 10 minutes.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  const byTime: [table: string, column: string][] = [
    ['idempotency_keys', 'expires_at'],
    ['webhook_attempts', 'at'],
    ['webhook_messages', 'created_at'],
    ['refresh_tokens', 'family_created_at'],
    ['user_sessions', 'last_seen_at'],
    ['authorization_codes', 'expires_at'],
    ['user_setup_tokens', 'expires_at'],
  ]
  for (const [table, column] of byTime) await db.schema.createIndex(`${table}_by_${column}`).on(table).column(column).execute()
}
