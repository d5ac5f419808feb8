import { sql } from 'kysely'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { jcsHash } from '../hashing.js'
import type { Dialect } from '../store/database.js'
import { insertRows } from '../store/precompiled.js'
import type { Db } from '../store/schema.js'

export type AuditEntry = {
  at: string; jti: string | null; client_id: string | null; sub: string | null
  method: string; path: string; status: number; request_id: string
}

export type AuditRecord = AuditEntry & { prev_hash: string; hash: string }

export const GENESIS_HASH = `sha256:${'0'.repeat(64)}`
const FLUSH_EVERY_MS = 20
const FLUSH_AT = 500

/** The chain's link: each record's hash covers its fields and the previous record's hash. */
export const auditHash = (entry: AuditEntry, prevHash: string) => jcsHash({ ...entry, prev_hash: prevHash })

/**
 * SPEC §6 append-only, hash-chained audit log. Entries are gathered for a few milliseconds and
 * chained in one transaction, so auditing costs the request path no database round trip;
 * shutdown flushes what is pending.
 */
export class AuditLog {
  private pending: AuditEntry[] = []
  private timer: NodeJS.Timeout | null = null
  private flushing: Promise<void> = Promise.resolve()

  constructor(private readonly db: Db, private readonly dialect: Dialect, private readonly clock: Clock) {}

  record(entry: Omit<AuditEntry, 'at'>): void {
    this.pending.push({ at: iso(this.clock.now()), ...entry })
    if (this.pending.length >= FLUSH_AT) void this.flush()
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS)
  }

  /** Writes everything recorded so far; resolves when it is committed. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    const batch = this.pending
    this.pending = []
    this.flushing = this.flushing.then(() => (batch.length ? this.write(batch) : undefined)).catch(() => {
      this.pending.unshift(...batch) // keep them for the next flush rather than lose them
    })
    return this.flushing
  }

  private async write(batch: AuditEntry[]): Promise<void> {
    await this.db.transaction().execute(async (trx) => {
      // Instances sharing PostgreSQL take turns extending the one chain.
      if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(7270001)`.execute(trx)
      const last = await trx.selectFrom('audit_events').select('hash').orderBy('pos', 'desc').limit(1).executeTakeFirst()
      let head = last?.hash ?? GENESIS_HASH
      const rows = batch.map((entry) => {
        const hash = auditHash(entry, head)
        const row = { ...entry, prev_hash: head, hash }
        head = hash
        return row
      })
      await insertRows(trx, 'audit_events', rows)
    })
  }

  /** Recomputes the whole chain: the first record that does not add up is reported. */
  async verify(): Promise<{ valid: boolean; length: number; first_bad_pos?: number }> {
    await this.flush()
    const rows = await this.db.selectFrom('audit_events').selectAll().orderBy('pos').execute()
    let head = GENESIS_HASH
    for (const { pos, prev_hash, hash, ...entry } of rows) {
      if (prev_hash !== head || auditHash(entry, head) !== hash) return { valid: false, length: rows.length, first_bad_pos: pos }
      head = hash
    }
    return { valid: true, length: rows.length }
  }
}
