import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { assertStep, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'

/**
 * Readings in their own SQLite file (not the entity store's: the write rate is orders of
 * magnitude higher and must not hold the entity store's write lock).
 *
 * - WITHOUT ROWID with PRIMARY KEY (tote_id, ts): rows are clustered per tote in time order,
 *   which is both the dedup key and the `readingsForTote` scan; INSERT OR IGNORE makes
 *   retransmissions no-ops.
 * - WAL + synchronous=NORMAL: a committed write survives a crash of the process; after a power
 *   loss the last transactions may roll back (SQLite docs, "WAL mode ... synchronous=NORMAL").
 *   The embedded default trades that for ~10x the commit rate; QuestDB is the durable option.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS readings (
  tote_id     TEXT    NOT NULL,
  ts          INTEGER NOT NULL,
  delivery_id TEXT,
  rx_id       TEXT,
  temp_c      REAL    NOT NULL,
  battery     REAL,
  humidity    REAL,
  lat         REAL,
  lng         REAL,
  seq         INTEGER,
  received_at INTEGER NOT NULL,
  late        INTEGER NOT NULL,
  PRIMARY KEY (tote_id, ts)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS readings_by_delivery ON readings (delivery_id, ts) WHERE delivery_id IS NOT NULL;
`

const COLUMNS = 'tote_id, ts, delivery_id, rx_id, temp_c, battery, humidity, lat, lng, seq, received_at, late'
const PARAMS_PER_ROW = 12
/** Rows per INSERT statement: fewer statement steps, within SQLite's 32766 bound parameters. */
const ROWS_PER_STATEMENT = 100

type StoredRow = Omit<ReadingRow, 'late'> & { late: 0 | 1 }

export type SqliteSinkOptions = {
  /** A file path, or ':memory:' (tests). */
  path: string
}

export function createSqliteSink({ path }: SqliteSinkOptions): ReadingSink {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new Database(path)
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.exec(SCHEMA)

  const values = (n: number) => Array.from({ length: n }, () => `(${'?,'.repeat(PARAMS_PER_ROW - 1)}?)`).join(',')
  const insertMany = db.prepare(`INSERT OR IGNORE INTO readings (${COLUMNS}) VALUES ${values(ROWS_PER_STATEMENT)}`)
  const insertOne = db.prepare(`INSERT OR IGNORE INTO readings (${COLUMNS}) VALUES ${values(1)}`)
  const params: unknown[] = new Array(PARAMS_PER_ROW * ROWS_PER_STATEMENT)

  // One transaction per write(): 10,000 rows commit (and sync the WAL) once.
  const writeAll = db.transaction((rows: readonly ReadingRow[]) => {
    let i = 0
    for (; i + ROWS_PER_STATEMENT <= rows.length; i += ROWS_PER_STATEMENT) {
      for (let k = 0; k < ROWS_PER_STATEMENT; k++) bindRow(rows[i + k]!, params, k * PARAMS_PER_ROW)
      insertMany.run(params)
    }
    for (; i < rows.length; i++) {
      bindRow(rows[i]!, oneRow, 0)
      insertOne.run(oneRow)
    }
  })
  const oneRow: unknown[] = new Array(PARAMS_PER_ROW)

  const byDelivery = db.prepare<[string, number, number], StoredRow>(
    `SELECT ${COLUMNS} FROM readings WHERE delivery_id = ? AND ts >= ? AND ts < ? ORDER BY ts`)
  const byTote = db.prepare<[string, number, number], StoredRow>(
    `SELECT ${COLUMNS} FROM readings WHERE tote_id = ? AND ts >= ? AND ts < ? ORDER BY ts`)
  const buckets = db.prepare<[number, number, string, number, number], TemperatureBucket>(`
    SELECT (ts / ?) * ? AS t, min(temp_c) AS min, max(temp_c) AS max, avg(temp_c) AS avg, count(*) AS n
    FROM readings WHERE delivery_id = ? AND ts >= ? AND ts < ?
    GROUP BY t ORDER BY t`)
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM readings')

  const toRow = (r: StoredRow): ReadingRow => ({ ...r, late: r.late === 1 })
  // SQLite compares an INTEGER column with a REAL bound fine, but ±Infinity binds as NULL.
  const bound = (ms: number) => (ms === Infinity ? Number.MAX_SAFE_INTEGER : ms === -Infinity ? Number.MIN_SAFE_INTEGER : ms)

  return {
    async write(rows) {
      if (rows.length > 0) writeAll(rows)
    },
    async readingsForDelivery(deliveryId, fromMs, toMs) {
      return byDelivery.all(deliveryId, bound(fromMs), bound(toMs)).map(toRow)
    },
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      return buckets.all(stepMs, stepMs, deliveryId, bound(fromMs), bound(toMs))
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

/** Writes a row's parameters in COLUMNS order at `at`, reusing one array for every statement. */
function bindRow(r: ReadingRow, target: unknown[], at: number): void {
  target[at] = r.tote_id
  target[at + 1] = r.ts
  target[at + 2] = r.delivery_id
  target[at + 3] = r.rx_id
  target[at + 4] = r.temp_c
  target[at + 5] = r.battery
  target[at + 6] = r.humidity
  target[at + 7] = r.lat
  target[at + 8] = r.lng
  target[at + 9] = r.seq
  target[at + 10] = r.received_at
  target[at + 11] = r.late ? 1 : 0
}
