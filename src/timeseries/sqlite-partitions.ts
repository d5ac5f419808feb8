import type Database from 'better-sqlite3'

/**
 * The readings file's time partitions: one UTC day of readings (by `ts`) per pair of tables,
 * named by the day's number since 1970-01-01 (`readings_day_20089` is 2025-01-01):
 *
 * - `readings_day_N`, the row table: one row per reading, UNIQUE (tote_key, ts) the dedup key
 *   and its only index. New readings land here.
 * - `chunks_day_N`, the chunk table: once a day has ended, compaction (sqlite-compaction.ts)
 *   moves its rows into chunks — one tote's readings of one binding, up to CHUNK_READINGS of
 *   them, encoded by sqlite-chunk.ts — and drops the row table. A reading arriving late for
 *   a compacted day goes into a new row table of that day (unless a chunk holds it already) and
 *   is compacted on the next pass.
 *
 * Every reading is in exactly one of the two. Expiry drops a day's tables whole when nothing in
 * them is kept (sqlite-expiry.ts); a query reads only the days its time range covers.
 *
 * A chunk table's binding index is (binding_key, tote_key, first_ts): in the order compaction
 * inserts chunks (tote by tote), so the index entries of consecutive chunks are neighbours and a
 * batch that packs or empties a run of them rewrites a few index pages. Ordered by first_ts alone
 * (`_by_binding`, chunk tables made before), the unbound chunks of thousands of totes interleave
 * and a batch of 250 rewrote ~200 pages. Tables keep the index they were made with; `Day.byTote`
 * says which.
 */

export const DAY_MS = 86_400_000

export const dayOf = (ts: number): number => Math.floor(ts / DAY_MS)
const suffix = (day: number) => (day < 0 ? `m${-day}` : String(day))
export const rowTable = (day: number): string => `readings_day_${suffix(day)}`
export const chunkTable = (day: number): string => `chunks_day_${suffix(day)}`

const ROW_COLUMNS = `
  tote_key    INTEGER NOT NULL,
  ts          INTEGER NOT NULL,
  binding_key INTEGER,
  temp_c      REAL    NOT NULL,
  battery     REAL,
  humidity    REAL,
  lat         REAL,
  lng         REAL,
  seq         INTEGER,
  received_at INTEGER NOT NULL,
  late        INTEGER NOT NULL`

// A rowid table and its UNIQUE index, as the single table was: WITHOUT ROWID keyed (tote_key, ts)
// was measured too (docs/performance.md, Storage) and wrote 10,000-row batches 20–35 % slower —
// its leaves hold whole rows, ~65 a page against ~200 index entries, so a tote's insertion point
// fills and splits three times as often — while this table only appends.
const createRows = (t: string) => `CREATE TABLE IF NOT EXISTS ${t} (${ROW_COLUMNS}, UNIQUE (tote_key, ts))`
// `data` last: a scan of the other columns (expiry, counts) does not read the blobs.
const createChunks = (t: string) => `
  CREATE TABLE IF NOT EXISTS ${t} (
    tote_key INTEGER NOT NULL, first_ts INTEGER NOT NULL, last_ts INTEGER NOT NULL, binding_key INTEGER,
    n INTEGER NOT NULL, data BLOB NOT NULL);
  CREATE UNIQUE INDEX IF NOT EXISTS ${t}_by_tote ON ${t} (tote_key, first_ts);
  CREATE INDEX IF NOT EXISTS ${t}_by_binding_tote ON ${t} (binding_key, tote_key, first_ts);`

/** Which tables the day has; `byTote`: its chunk table's binding index is (binding_key, tote_key, first_ts). */
type Day = { rows: boolean; chunks: boolean; byTote: boolean }

export type Partitions = ReturnType<typeof openPartitions>

/** The days present in the file, kept in memory; tables are created and dropped only through here. */
export function openPartitions(db: Database.Database) {
  const days = new Map<number, Day>()
  let sorted: number[] | null = null
  const statements = new Map<string, Database.Statement>()
  for (const { name } of db
    .prepare<[], { name: string }>(
      "SELECT name FROM sqlite_master WHERE type IN ('table', 'index') AND name LIKE '%\\_day\\_%' ESCAPE '\\'",
    )
    .all()) {
    const match = /^(readings|chunks)_day_(m?)(\d+)(_by_binding_tote)?$/.exec(name)
    if (!match) continue
    const day = (match[2] === 'm' ? -1 : 1) * Number(match[3])
    const entry = days.get(day) ?? { rows: false, chunks: false, byTote: false }
    if (match[4]) entry.byTote = true
    else if (match[1] === 'readings') entry.rows = true
    else entry.chunks = true
    days.set(day, entry)
  }
  /** Bumped whenever a table is dropped or the view reloaded: statements kept outside are stale. */
  let generation = 0
  const forget = (table: string) => {
    generation++
    for (const key of statements.keys()) if (key.startsWith(`${table}:`)) statements.delete(key)
  }
  const drop = (day: number, kind: 'rows' | 'chunks') => {
    const entry = days.get(day)
    if (!entry?.[kind]) return
    const table = kind === 'rows' ? rowTable(day) : chunkTable(day)
    db.exec(`DROP TABLE ${table}`)
    forget(table)
    entry[kind] = false
    if (kind === 'chunks') entry.byTote = false
    if (!entry.rows && !entry.chunks) {
      days.delete(day)
      sorted = null
    }
  }

  return {
    /** Changes when statements prepared before may name a dropped table. */
    generation: () => generation,
    /** The day's entry, if it has a table. */
    get: (day: number): Day | undefined => days.get(day),
    /** Days with a table that `fromMs <= ts < toMs` touches, oldest first. */
    covering(fromMs: number, toMs: number): number[] {
      if (toMs <= fromMs) return []
      sorted ??= [...days.keys()].sort((a, b) => a - b)
      const first = dayOf(fromMs)
      const last = dayOf(toMs - 1)
      return sorted.filter((d) => d >= first && d <= last)
    },
    /** Every day with a table, oldest first. */
    all(): number[] {
      sorted ??= [...days.keys()].sort((a, b) => a - b)
      return sorted
    },
    /** Creates the day's row table if it has none; inside the caller's transaction. */
    ensureRows(day: number): void {
      const entry = days.get(day)
      if (entry?.rows) return
      db.exec(createRows(rowTable(day)))
      if (entry) entry.rows = true
      else {
        days.set(day, { rows: true, chunks: false, byTote: false })
        sorted = null
      }
    },
    ensureChunks(day: number): void {
      const entry = days.get(day)
      if (entry?.chunks) return
      db.exec(createChunks(chunkTable(day)))
      if (entry) Object.assign(entry, { chunks: true, byTote: true })
      else {
        days.set(day, { rows: false, chunks: true, byTote: true })
        sorted = null
      }
    },
    dropRows: (day: number) => drop(day, 'rows'),
    dropChunks: (day: number) => drop(day, 'chunks'),
    /**
     * A statement on one of a day's tables, prepared once: `table` must be named in `sql`. A
     * dropped table's statements are forgotten with it.
     */
    statement(table: string, purpose: string, sql: () => string): Database.Statement {
      const key = `${table}:${purpose}`
      let s = statements.get(key)
      if (s === undefined) statements.set(key, (s = db.prepare(sql())))
      return s
    },
    /** Reverts the in-memory view after a rolled-back transaction created or dropped tables. */
    reload(): void {
      const fresh = openPartitions(db)
      days.clear()
      for (const d of fresh.all()) days.set(d, { ...fresh.get(d)! })
      sorted = null
      statements.clear()
      generation++
    },
  }
}

/** Rows moved per transaction when an old file's single `readings` table is split into days. */
const LEGACY_BATCH = 20_000

/**
 * Files written before the day partitions had one `readings` table (rowid, UNIQUE (tote_key,
 * ts)). Its rows move to their days on open, 20,000 per transaction, and the table is dropped
 * once empty: a crash in between leaves each row in exactly one place, and the next open goes on.
 */
export function migrateLegacyReadings(db: Database.Database, partitions: Partitions): number {
  if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'readings'").get()) return 0
  const columns = 'tote_key, ts, binding_key, temp_c, battery, humidity, lat, lng, seq, received_at, late'
  const batch = db.prepare<[number], { rowid: number; ts: number }>(`SELECT rowid, ts FROM readings ORDER BY rowid LIMIT ?`)
  let moved = 0
  const step = db.transaction(() => {
    const rows = batch.all(LEGACY_BATCH)
    if (rows.length === 0) return false
    const last = rows.at(-1)!.rowid
    const byDay = new Set(rows.map((r) => dayOf(r.ts)))
    for (const day of byDay) {
      partitions.ensureRows(day)
      db.prepare(
        `INSERT INTO ${rowTable(day)} (${columns}) SELECT ${columns} FROM readings WHERE rowid <= ? AND ts >= ? AND ts < ? ON CONFLICT DO NOTHING`,
      ).run(last, day * DAY_MS, (day + 1) * DAY_MS)
    }
    db.prepare('DELETE FROM readings WHERE rowid <= ?').run(last)
    moved += rows.length
    return true
  })
  while (step());
  db.exec('DROP TABLE readings')
  return moved
}
