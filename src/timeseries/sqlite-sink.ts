import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { assertStep, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'
import { createKeyDictionary } from './sqlite-dictionary.js'

/**
 * Readings in their own SQLite file (not the entity store's: the write rate is orders of
 * magnitude higher and must not hold the entity store's write lock).
 *
 * - Ids are dictionary-encoded: `totes` and `bindings` (delivery_id, rx_id) map the 29-character
 *   ids to small integers, so the two indexes hold a few bytes per reading instead of ~70. In the
 *   comparison that chose this schema, text keys wrote about half as many rows/s.
 * - UNIQUE (tote_key, ts) is the dedup key and the `readingsForTote` scan; ON CONFLICT DO
 *   NOTHING makes a retransmission a no-op. (binding_key, ts) serves the delivery trace.
 * - The rowid table itself is append-only; each batch is inserted in (tote, ts) order, and 16 KiB
 *   pages with a 64 MiB cache keep the index pages of a few thousand active totes in memory.
 * - WAL + synchronous=NORMAL: a committed write survives a crash of the process; after a power
 *   loss the last transactions may roll back (SQLite docs, "WAL mode ... synchronous=NORMAL").
 *   The embedded default trades that for the commit rate; QuestDB is the durable option.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS totes (
  tote_key INTEGER PRIMARY KEY,
  tote_id  TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS bindings (
  binding_key INTEGER PRIMARY KEY,
  delivery_id TEXT,
  rx_id       TEXT
);
CREATE INDEX IF NOT EXISTS bindings_by_delivery ON bindings (delivery_id, rx_id);
CREATE TABLE IF NOT EXISTS readings (
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
  late        INTEGER NOT NULL,
  UNIQUE (tote_key, ts)
);
CREATE INDEX IF NOT EXISTS readings_by_binding ON readings (binding_key, ts) WHERE binding_key IS NOT NULL;
`

const COLUMNS = 'tote_key, ts, binding_key, temp_c, battery, humidity, lat, lng, seq, received_at, late'
const PARAMS_PER_ROW = 11
/** Rows per INSERT statement: fewer statement steps, within SQLite's 32766 bound parameters. */
const ROWS_PER_STATEMENT = 100
/** Dictionary entries kept in memory; a binding is one delivery, so this bounds a long-running process. */
const MAX_CACHED_KEYS = 100_000

const SELECT_ROWS = `
  SELECT t.tote_id, b.delivery_id, b.rx_id, r.ts, r.temp_c, r.battery, r.humidity, r.lat, r.lng, r.seq,
         r.received_at, r.late
  FROM readings r
  JOIN totes t ON t.tote_key = r.tote_key
  LEFT JOIN bindings b ON b.binding_key = r.binding_key`

type StoredRow = Omit<ReadingRow, 'late'> & { late: 0 | 1 }

export type SqliteSinkOptions = {
  /** A file path, or ':memory:' (tests). */
  path: string
}

export function createSqliteSink({ path }: SqliteSinkOptions): ReadingSink {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new Database(path)
  db.pragma('page_size = 16384') // only takes effect on a new file, before WAL is switched on
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.pragma('cache_size = -65536')
  db.exec(SCHEMA)
  const keys = createKeyDictionary(db, MAX_CACHED_KEYS)

  const values = (n: number) => Array.from({ length: n }, () => `(${'?,'.repeat(PARAMS_PER_ROW - 1)}?)`).join(',')
  // ON CONFLICT DO NOTHING rather than INSERT OR IGNORE: OR IGNORE would also silently skip a
  // row that breaks NOT NULL; the upsert clause ignores only the (tote_key, ts) duplicate.
  const insert = (n: number) => db.prepare(`INSERT INTO readings (${COLUMNS}) VALUES ${values(n)} ON CONFLICT (tote_key, ts) DO NOTHING`)
  const insertMany = insert(ROWS_PER_STATEMENT)
  const insertOne = insert(1)
  const manyParams: unknown[] = new Array(PARAMS_PER_ROW * ROWS_PER_STATEMENT)
  const oneParams: unknown[] = new Array(PARAMS_PER_ROW)

  /** Writes a row's parameters in COLUMNS order at `at`, reusing one array for every statement. */
  const bindRow = (r: ReadingRow, target: unknown[], at: number) => {
    target[at] = keys.toteKey(r.tote_id)
    target[at + 1] = r.ts
    target[at + 2] = keys.bindingKey(r.delivery_id, r.rx_id)
    target[at + 3] = r.temp_c
    target[at + 4] = r.battery
    target[at + 5] = r.humidity
    target[at + 6] = r.lat
    target[at + 7] = r.lng
    target[at + 8] = r.seq
    target[at + 9] = r.received_at
    target[at + 10] = r.late ? 1 : 0
  }

  // One transaction per write(): 10,000 rows commit (and sync the WAL) once.
  const writeAll = db.transaction((input: readonly ReadingRow[]) => {
    // In (tote, ts) order, consecutive inserts land on the same index pages instead of hopping
    // between a thousand totes' pages: ~1.5x the rows/s, sort included.
    const rows = [...input].sort(byToteThenTs)
    let i = 0
    for (; i + ROWS_PER_STATEMENT <= rows.length; i += ROWS_PER_STATEMENT) {
      for (let k = 0; k < ROWS_PER_STATEMENT; k++) bindRow(rows[i + k]!, manyParams, k * PARAMS_PER_ROW)
      insertMany.run(manyParams)
    }
    for (; i < rows.length; i++) {
      bindRow(rows[i]!, oneParams, 0)
      insertOne.run(oneParams)
    }
  })

  const ofDelivery = 'r.binding_key IN (SELECT binding_key FROM bindings WHERE delivery_id = ?) AND r.ts >= ? AND r.ts < ?'
  const byDelivery = db.prepare<[string, number, number], StoredRow>(`${SELECT_ROWS} WHERE ${ofDelivery} ORDER BY r.ts`)
  const byTote = db.prepare<[string, number, number], StoredRow>(
    `${SELECT_ROWS} WHERE r.tote_key = (SELECT tote_key FROM totes WHERE tote_id = ?) AND r.ts >= ? AND r.ts < ? ORDER BY r.ts`)
  // better-sqlite3 binds JS numbers as REAL, so `ts / step` would not truncate; `%` always does.
  const buckets = db.prepare<[number, string, number, number], TemperatureBucket>(`
    SELECT r.ts - r.ts % ? AS t, min(r.temp_c) AS min, max(r.temp_c) AS max, avg(r.temp_c) AS avg, count(*) AS n
    FROM readings r WHERE ${ofDelivery}
    GROUP BY t ORDER BY t`)
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM readings')

  const toRow = (r: StoredRow): ReadingRow => ({ ...r, late: r.late === 1 })
  // ±Infinity would bind as NULL and match nothing; callers use them for "unbounded".
  const bound = (ms: number) => Math.min(Math.max(ms, Number.MIN_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)

  return {
    async write(rows) {
      if (rows.length === 0) return
      try {
        writeAll(rows)
      } catch (err) {
        keys.forget() // the rollback also removed any dictionary rows this write added
        throw err
      }
    },
    async readingsForDelivery(deliveryId, fromMs, toMs) {
      return byDelivery.all(deliveryId, bound(fromMs), bound(toMs)).map(toRow)
    },
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      return buckets.all(stepMs, deliveryId, bound(fromMs), bound(toMs))
    },
    async readingsForTote(toteId, fromMs, toMs) {
      return byTote.all(toteId, bound(fromMs), bound(toMs)).map(toRow)
    },
    async count() {
      return countAll.get()!.n
    },
    async close() {
      if (db.open) db.close()
    },
  }
}

const byToteThenTs = (a: ReadingRow, b: ReadingRow) => (a.tote_id < b.tote_id ? -1 : a.tote_id > b.tote_id ? 1 : a.ts - b.ts)
