import { CompiledQuery, sql, type SelectQueryBuilder } from 'kysely'
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { jcsHash } from '../hashing.js'
import type { Dialect } from '../store/database.js'
import { insertRow, insertRows, precompiled } from '../store/precompiled.js'
import type { Database, Db, Executor } from '../store/schema.js'
import type { StoredSignature } from '../domain/custody-event.js'

/** One request's record as written; its position and hash chain are the store's (schema.ts, audit_events). */
export type AuditEntry = Omit<Database['audit_events'], 'pos' | 'prev_hash' | 'hash'>

/** What a caller hands over; the time is the log's, the optional fields default to null. */
export type NewAuditEntry = Omit<AuditEntry, 'at' | 'pharmacy_id' | 'fleet_id' | 'action' | 'delivery_id' | 'signature'> &
  Partial<Pick<AuditEntry, 'pharmacy_id' | 'fleet_id' | 'action' | 'delivery_id' | 'signature'>>

/** Whose records a restricted reader sees: its token's tenant. */
export type AuditTenant = { pharmacyId: string | null; fleetId: string | null }

const GENESIS_HASH = `sha256:${'0'.repeat(64)}`
const FLUSH_EVERY_MS = 20
const FLUSH_AT = 500
// Verification reads and hashes this many records at a time (~20 ms of work), then lets the
// event loop answer whatever else is waiting before the next chunk.
const VERIFY_CHUNK = 500

/**
 * One page of verification. `deployment`: the whole chain, every link to the record before
 * included. `tenant`: one pharmacy's or fleet's records, each recomputed from its fields and
 * prev_hash (the records it links to are other tenants' and are not shown to it).
 */
export type AuditVerdict = {
  scope: 'deployment' | 'tenant'
  valid: boolean
  /** Records found good in this page. */
  checked: number
  /** Hash of the last good record of the page; null when the page was empty. */
  head: string | null
  first_bad_pos?: number
  /** Position to continue after, or null when the records ended. */
  next_pos: number | null
}

/**
 * A record as it is shown and hashed: the tenant, action and delivery fields only when set, so
 * records written before they existed (and unrestricted tokens' records) hash exactly as they always did.
 */
export function shownEntry<T extends AuditEntry>({ pharmacy_id, fleet_id, action, delivery_id, signature, ...rest }: T) {
  return {
    ...rest,
    ...(signature === null || signature === undefined ? {} : { signature: JSON.parse(signature) as StoredSignature }),
    ...(pharmacy_id === null ? {} : { pharmacy_id }),
    ...(fleet_id === null ? {} : { fleet_id }),
    ...(action === null || action === undefined ? {} : { action }),
    ...(delivery_id === null || delivery_id === undefined ? {} : { delivery_id }),
  }
}

/** The chain's link: each record's hash covers its fields and the previous record's hash. */
const auditHash = (entry: AuditEntry, prevHash: string) => jcsHash({ ...shownEntry(entry), prev_hash: prevHash })

/**
 * The append-only, hash-chained audit log (docs/api.md, Audit log).
 *
 * A state-changing request is in the log before its answer is sent: `append` writes its record
 * inside the transaction of the change (so both commit or neither does), and `commit` writes one
 * in a transaction of its own and resolves once it is committed. Reads go through `record`: they
 * change nothing a crash could lose, so their records are gathered for a few milliseconds and
 * chained in one transaction, costing the request path no database round trip; shutdown flushes
 * what is pending.
 */
export class AuditLog {
  private pending: AuditEntry[] = []
  /** The hash this process last linked a record to the chain with (SQLite); null: read it from the table. */
  private knownHead: string | null = null
  private timer: NodeJS.Timeout | null = null
  private flushing: Promise<void> = Promise.resolve()

  constructor(
    private readonly db: Db,
    private readonly dialect: Dialect,
    private readonly clock: Clock,
  ) {}

  /** Batched: for requests that change nothing (reads). */
  record(entry: NewAuditEntry): void {
    this.pending.push(this.stamped(entry))
    if (this.pending.length >= FLUSH_AT) void this.flush()
    else this.timer ??= setTimeout(() => void this.flush(), FLUSH_EVERY_MS)
  }

  /**
   * Chains one record inside `trx`, the transaction of the change it records. On PostgreSQL the
   * chain's lock is then held to that transaction's commit, so callers append last, after their
   * own writes (a lock taken after it could deadlock with a writer waiting for the chain).
   */
  async append(trx: Executor, entry: NewAuditEntry, ...more: NewAuditEntry[]): Promise<void> {
    await this.chain(
      trx,
      [entry, ...more].map((e) => this.stamped(e)),
    )
  }

  /** Writes one record in its own transaction; resolves once it is committed. */
  async commit(entry: NewAuditEntry): Promise<void> {
    const stamped = this.stamped(entry)
    await this.db.transaction().execute((trx) => this.chain(trx, [stamped]))
  }

  /** Writes everything recorded so far; resolves when it is committed. */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer)
    this.timer = null
    const batch = this.pending
    this.pending = []
    this.flushing = this.flushing
      .then(() => (batch.length ? this.db.transaction().execute((trx) => this.chain(trx, batch)) : undefined))
      .catch(() => {
        this.pending.unshift(...batch) // keep them for the next flush rather than lose them
      })
    return this.flushing
  }

  private stamped({
    pharmacy_id = null,
    fleet_id = null,
    action = null,
    delivery_id = null,
    signature = null,
    ...entry
  }: NewAuditEntry): AuditEntry {
    return { at: iso(this.clock.now()), ...entry, pharmacy_id, fleet_id, action, delivery_id, signature }
  }

  /** Links `entries` after the chain's head, in the transaction `trx`. */
  private async chain(trx: Executor, entries: AuditEntry[]): Promise<void> {
    if (this.dialect === 'sqlite' && entries.length === 1 && (await this.appendAfterKnownHead(trx, entries[0]!))) return
    // Instances sharing PostgreSQL take turns extending the one chain; SQLite runs one transaction at a time.
    if (this.dialect === 'postgres') await sql`select pg_advisory_xact_lock(7270001)`.execute(trx)
    const [last] = await chainHead(trx)
    let head = last?.hash ?? GENESIS_HASH
    const rows = entries.map((entry) => {
      const hash = auditHash(entry, head)
      const row = { ...entry, prev_hash: head, hash }
      head = hash
      return row
    })
    if (rows.length === 1) await insertRow(trx, 'audit_events', rows[0]!)
    else await insertRows(trx, 'audit_events', rows)
    this.knownHead = head
  }

  /**
   * SQLite: every write request appends one record, and reading the head first costs as much as
   * the insert. The head this process last wrote is usually still the head, so the record is
   * linked to it and inserted only if the stored head is that hash, checked by the same statement.
   * When it is not (that transaction rolled back, another process such as the CLI appended
   * since), nothing is inserted and `chain` reads the head as usual.
   */
  private async appendAfterKnownHead(trx: Executor, entry: AuditEntry): Promise<boolean> {
    const prev = this.knownHead
    if (prev === null) return false
    const hash = auditHash(entry, prev)
    const row = { ...entry, prev_hash: prev, hash }
    const values = APPEND_COLUMNS.map((column) => row[column])
    const { numAffectedRows } = await trx.executeQuery(CompiledQuery.raw(APPEND_IF_HEAD, [...values, prev]))
    if (numAffectedRows !== 1n) return false
    this.knownHead = hash
    return true
  }

  /**
   * Verifies up to `limit` records after position `afterPos` (0: from the start), in chunks
   * with the event loop yielded between them, so a long chain never freezes the service.
   * Without `tenant` it is the deployment's chain, links included: the first record of the
   * page must link to the stored hash of the record before it, which the previous page checked.
   */
  async verify({
    tenant,
    afterPos = 0,
    limit,
  }: {
    tenant?: AuditTenant | undefined
    afterPos?: number
    limit: number
  }): Promise<AuditVerdict> {
    await this.flush()
    const scope = tenant === undefined ? 'deployment' : 'tenant'
    let head = scope === 'deployment' ? await this.hashAt(afterPos) : null
    let after = afterPos
    let checked = 0
    const page = (from: number, size: number) => {
      const query = this.db.selectFrom('audit_events').selectAll().where('pos', '>', from)
      return (tenant ? ofTenant(query, tenant) : query).orderBy('pos').limit(size).execute()
    }
    while (checked < limit) {
      if (checked > 0) await yieldToEventLoop()
      const size = Math.min(VERIFY_CHUNK, limit - checked)
      const rows = await page(after, size)
      for (const { pos, prev_hash, hash, ...entry } of rows) {
        const linked = scope === 'tenant' || prev_hash === head
        if (!linked || auditHash(entry, prev_hash) !== hash)
          return { scope, valid: false, checked, head, first_bad_pos: pos, next_pos: null }
        head = hash
        after = pos
        checked++
      }
      if (rows.length < size) return { scope, valid: true, checked, head, next_pos: null }
    }
    const more = (await page(after, 1)).length > 0
    return { scope, valid: true, checked, head, next_pos: more ? after : null }
  }

  /** The stored hash of the last record at or before `pos`: what the next record must link to. */
  private async hashAt(pos: number): Promise<string> {
    if (pos <= 0) return GENESIS_HASH
    const row = await this.db
      .selectFrom('audit_events')
      .select('hash')
      .where('pos', '<=', pos)
      .orderBy('pos', 'desc')
      .limit(1)
      .executeTakeFirst()
    return row?.hash ?? GENESIS_HASH
  }
}

const APPEND_COLUMNS = [
  'at',
  'jti',
  'client_id',
  'sub',
  'method',
  'path',
  'status',
  'request_id',
  'pharmacy_id',
  'fleet_id',
  'action',
  'delivery_id',
  'signature',
  'prev_hash',
  'hash',
] as const satisfies readonly (keyof Database['audit_events'])[]
/** SQLite: inserts the record only if the chain's stored head is its `prev_hash` (the last parameter). */
const APPEND_IF_HEAD =
  `insert into "audit_events" (${APPEND_COLUMNS.map((c) => `"${c}"`).join(', ')}) ` +
  `select ${APPEND_COLUMNS.map(() => '?').join(', ')} ` +
  `where (select "hash" from "audit_events" order by "pos" desc limit 1) = ?`

const chainHead = precompiled((db) => db.selectFrom('audit_events').select('hash').orderBy('pos', 'desc').limit(1))

/** A restricted reader's records: those its tenant's tokens made. */
export function ofTenant<Q extends SelectQueryBuilder<Database, 'audit_events', object>>(query: Q, tenant: AuditTenant): Q {
  if (tenant.pharmacyId) return query.where('pharmacy_id', '=', tenant.pharmacyId) as Q
  if (tenant.fleetId) return query.where('fleet_id', '=', tenant.fleetId) as Q
  return query.where(sql<boolean>`false`) as Q // no tenant named: nothing, never everything
}
