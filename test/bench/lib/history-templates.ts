/**
 * bench:history's delivery templates: a few real delivery lifecycles run through the service's
 * own HTTP routes (in-process, `app.request()`), with every row they leave in the entity store
 * captured, so that a year of deliveries can be written as copies of exactly those rows (the
 * inserts the write path does, batched into big transactions) instead of a year of requests.
 *
 * A copy maps every id the lifecycle made to a fresh id of the same kind whose ULID time is the
 * copy's own (so ids keep sorting by creation time, as lists page), maps the pharmacy, fleet,
 * driver and tote to the copy's, and shifts every timestamp (ISO text and epoch ms) by the copy's
 * offset. Hashes are copied as they are: a copy's custody and audit chains do not verify, which
 * no hot path measured here checks.
 */
import type Database from 'better-sqlite3'
import { decodeTime, factory } from 'ulid'

// ulid's default PRNG draws crypto bytes one character at a time; copies need unique ids, not secret ones.
const ulid = factory(Math.random)

/** Rows one lifecycle left, per table, as SQLite returned them (column → value). */
export type CapturedRows = Record<string, Record<string, unknown>[]>

export type Template = {
  name: string
  /** Epoch ms the lifecycle started (the clock when its prescription was created). */
  startMs: number
  rows: CapturedRows
  /** The delivery's tote during the lifecycle, or null (no cold chain). */
  toteId: string | null
  /** Its binding interval, ms from `startMs`, when it had a tote. */
  bound: { fromMs: number; toMs: number } | null
}

/** What a copy uses in place of the template's own pharmacy, fleet, drivers and tote. */
export type Tenancy = { pharmacyId: string; fleetId: string; driverIds: string[]; toteId: string | null }

// Tables a lifecycle touches that are not part of a delivery's record: token and throttle
// bookkeeping, migrations.
export const NOT_COPIED: ReadonlySet<string> = new Set([
  'rate_limit_buckets',
  'sign_in_failures',
  'revoked_tokens',
  'signing_keys',
  'kysely_migration',
  'kysely_migration_lock',
  // PostgreSQL: which copy evaluates an open delivery's readings; released when it ends.
  'rule_leases',
])

/** max(rowid) of every table that has one, before a lifecycle: what it adds comes after. */
export function rowidMarks(db: Database.Database): Map<string, number> {
  const marks = new Map<string, number>()
  for (const { name } of db.prepare(`select name from sqlite_master where type = 'table' and name not like 'sqlite_%'`).all() as {
    name: string
  }[]) {
    if (NOT_COPIED.has(name)) continue
    try {
      const { m } = db.prepare(`select coalesce(max(rowid), 0) as m from "${name}"`).get() as { m: number }
      marks.set(name, m)
    } catch {
      // WITHOUT ROWID: not captured (none of a delivery's tables is one today).
    }
  }
  return marks
}

/** The rows added since `marks`, per table. */
export function rowsSince(db: Database.Database, marks: Map<string, number>): CapturedRows {
  const rows: CapturedRows = {}
  for (const [table, mark] of marks) {
    const added = db.prepare(`select * from "${table}" where rowid > ? order by rowid`).all(mark) as Record<string, unknown>[]
    if (added.length) rows[table] = added
  }
  return rows
}

const ID = /\b([a-z]{2,4})_([0-9a-z]{26})\b/g
const ISO = /\b(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,3})?Z)\b/g
// Epoch ms between 2001 and 2286: anything else in an integer column is not a time.
const EPOCH_MS_MIN = 1e12
const EPOCH_MS_MAX = 1e13

/** Per table a copy writes, the columns it writes: every column but those the engine assigns itself. */
export type CopyColumns = Map<string, string[]>

/** SQLite's: an INTEGER PRIMARY KEY is the rowid, left to SQLite so positions (event feed, audit) keep growing. */
function sqliteCopyColumns(db: Database.Database, tables: string[]): CopyColumns {
  const columns: CopyColumns = new Map()
  for (const table of tables) {
    const info = db.prepare(`pragma table_info("${table}")`).all() as { name: string; type: string; pk: number }[]
    const pkColumns = info.filter((c) => c.pk > 0)
    const rowid = (c: (typeof info)[number]) => pkColumns.length === 1 && c.pk === 1 && c.type.toUpperCase() === 'INTEGER'
    columns.set(
      table,
      info.filter((c) => !rowid(c)).map((c) => c.name),
    )
  }
  return columns
}

/**
 * Copies of one template: `copy(startMs, tenancy, emit)` gives `emit` each row of the copy
 * starting at `startMs` for `tenancy`, as the values of `columns`' columns of its table. `fixed`
 * are the template's own tenancy ids (pharmacy, fleet, drivers, tote), mapped to each copy's
 * `Tenancy`; every other id the template holds is new.
 */
export function templateCopies(template: Template, fixed: Tenancy, nowMs: number, columns: CopyColumns) {
  // An idempotency record lives a day (then the service's purge deletes it): only the last day's copies keep theirs.
  const nowIso = new Date(nowMs).toISOString()
  const fixedKeys = [fixed.pharmacyId, fixed.fleetId, ...fixed.driverIds, ...(fixed.toteId ? [fixed.toteId] : [])]

  return function copy(startMs: number, tenancy: Tenancy, emit: (table: string, values: unknown[]) => void): void {
    const shift = startMs - template.startMs
    const ids = new Map<string, string>()
    fixedKeys.forEach((id, i) => {
      const to = [tenancy.pharmacyId, tenancy.fleetId, ...tenancy.driverIds, ...(tenancy.toteId ? [tenancy.toteId] : [])][i]
      if (to) ids.set(id, to)
    })
    const mapId = (whole: string, prefix: string, body: string): string => {
      let to = ids.get(whole)
      if (!to) {
        let time: number
        try {
          time = decodeTime(body.toUpperCase()) + shift
        } catch {
          time = startMs
        }
        to = `${prefix}_${ulid(Math.max(0, time)).toLowerCase()}`
        ids.set(whole, to)
      }
      return to
    }
    const text = (value: string): string =>
      value
        .replace(ID, (whole, prefix: string, body: string) => mapId(whole, prefix, body))
        .replace(ISO, (iso: string) => new Date(Date.parse(iso) + shift).toISOString())
    for (const [table, rows] of Object.entries(template.rows)) {
      const names = columns.get(table)!
      const expiresAt = table === 'idempotency_keys' ? names.indexOf('expires_at') : -1
      for (const row of rows) {
        const values = names.map((name) => {
          const value = row[name]
          if (typeof value === 'string') return text(value)
          if (typeof value === 'number' && Number.isInteger(value) && value >= EPOCH_MS_MIN && value < EPOCH_MS_MAX) return value + shift
          return value
        })
        if (expiresAt >= 0 && String(values[expiresAt]) < nowIso) continue
        emit(table, values)
      }
    }
  }
}

/** A writer of copies of `template` into the SQLite `db`: one prepared insert per table. */
export function templateCopier(db: Database.Database, template: Template, fixed: Tenancy, nowMs: number) {
  const columns = sqliteCopyColumns(db, Object.keys(template.rows))
  const inserts = new Map<string, Database.Statement>()
  for (const [table, names] of columns) {
    const quoted = names.map((name) => `"${name}"`)
    inserts.set(table, db.prepare(`insert into "${table}" (${quoted.join(', ')}) values (${quoted.map(() => '?').join(', ')})`))
  }
  const copies = templateCopies(template, fixed, nowMs, columns)
  const emit = (table: string, values: unknown[]) => void inserts.get(table)!.run(values)
  return (startMs: number, tenancy: Tenancy) => copies(startMs, tenancy, emit)
}
