import { sql } from 'kysely'
import { iso } from '../clock.js'
import type { Db } from './schema.js'

const DAY_MS = 86_400_000

/**
 * What is not a record, and how long it stays (docs/operations.md, Retention). Records (deliveries
 * and their custody chains, audit events, events, alarms, EPCIS events, signatures) are not here:
 * the service removes none of them, so they outlive RETENTION_RECORDS_DAYS.
 *
 * Each rule removes rows whose `column` is before `before(nowMs)`; `column` is indexed
 * (migration 0062), so a batch reads only what it removes.
 */
type Rule = { table: string; column: string; before: (nowMs: number) => string | number; also?: string }

function recordRules(attemptsDays: number): Rule[] {
  const days = (n: number) => (now: number) => iso(now - n * DAY_MS)
  return [
    // Kept 24 h (docs/api.md, Idempotency): expires_at is that end.
    { table: 'idempotency_keys', column: 'expires_at', before: (now) => iso(now) },
    // RETENTION_ATTEMPTS_DAYS: what `GET /v1/webhooks/{id}/attempts` can show; retries end within two days.
    { table: 'webhook_attempts', column: 'at', before: days(attemptsDays) },
    // Finished messages (a redelivery makes a new one when its event's is gone); created_at is epoch ms.
    { table: 'webhook_messages', column: 'created_at', before: (now) => now - attemptsDays * DAY_MS, also: "state <> 'pending'" },
    // A refresh token family lives 30 days at most (absolute); its rotated tokens are kept that
    // long so a replayed one still revokes the family. One day of margin.
    { table: 'refresh_tokens', column: 'family_created_at', before: days(31) },
    // A code is good for 60 s; its row lets a second use revoke what the first issued, which
    // matters while those tokens live: the 30 days of a refresh family, and a day of margin.
    { table: 'authorization_codes', column: 'expires_at', before: days(31) },
    // A sign-in session idles out after 8 h; kept while a refresh token issued under it may be presented.
    { table: 'user_sessions', column: 'last_seen_at', before: days(31) },
    // Set-up links are good for 72 h.
    { table: 'user_setup_tokens', column: 'expires_at', before: days(1) },
  ]
}

/**
 * Removes up to about `limit` expired rows of each table; resolves with the rows removed per table.
 * A batch is one statement: a crash leaves each table either before or after it.
 */
export async function expireRecords(db: Db, nowMs: number, attemptsDays: number, limit: number): Promise<Record<string, number>> {
  const removed: Record<string, number> = {}
  for (const { table, column, before, also } of recordRules(attemptsDays)) {
    const cutoff = before(nowMs)
    const extra = also ? sql.raw(`and ${also}`) : sql``
    // The batch ends at the `limit`th oldest value: with ties a batch may take a few more rows.
    const edge = await sql<{ v: string | number }>`
      select ${sql.ref(column)} as v from ${sql.table(table)}
      where ${sql.ref(column)} < ${cutoff} ${extra} order by ${sql.ref(column)} limit 1 offset ${limit - 1}`.execute(db)
    const upTo = edge.rows[0]?.v
    const result = await sql`
      delete from ${sql.table(table)} where ${sql.ref(column)} < ${cutoff} ${extra}
      ${upTo === undefined ? sql`` : sql`and ${sql.ref(column)} <= ${upTo}`}`.execute(db)
    removed[table] = Number(result.numAffectedRows ?? 0n)
  }
  return removed
}
