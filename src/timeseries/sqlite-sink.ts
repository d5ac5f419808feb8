import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { createPrivateFile, ensurePrivateDataDir } from '../store/private-files.js'
import { checkpointOffThread } from '../store/wal-checkpointer.js'
import { assertStep, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'
import { createKeyDictionary } from './sqlite-dictionary.js'

/**
 * Readings in their own SQLite file (not the entity store's: the write rate is orders of
 * magnitude higher and must not hold the entity store's write lock).
 *
 * - Ids are dictionary-encoded: `totes` and `bindings` (delivery_id, rx_id) map the 29-character
 *   ids to small integers, so the two indexes hold a few bytes per reading instead of ~70. In the
 *   comparison that chose this schema, text keys wrote about half as many rows/s.
 * - UNIQUE (tote_key, ts) is the dedup key and the only index on readings: it serves
 *   `readingsForTote`, and the delivery trace too (a delivery's readings are one tote's readings
 *   over a span of time, see binding_spans). ON CONFLICT DO NOTHING makes a retransmission a no-op.
 * - `binding_spans` holds, per binding and tote, a ts range padded by an hour that covers all its
 *   readings; the writer widens it when a reading falls outside (about once an hour per
 *   delivery). It replaced an index on (binding_key, ts): single readings from many totes dirty
 *   one leaf page per index per reading, and every dirty page is written to the WAL at commit, so
 *   the second index doubled the WAL (~80 MB/s at 10k readings/s) and cost a third of the CPU.
 * - The rowid table itself is append-only; each batch is inserted in (tote, ts) order, and a
 *   64 MiB cache keeps the index pages of thousands of active totes in memory (4 KiB pages, see
 *   PAGE_SIZE).
 * - WAL + synchronous=NORMAL: a committed write survives a crash of the process; after a power
 *   loss the last transactions may roll back (SQLite docs, "WAL mode ... synchronous=NORMAL").
 *   The embedded default trades that for the commit rate; QuestDB is the durable option.
 * - WAL checkpoints run on a worker thread (store/wal-checkpointer.ts), not inside the commits
 *   that PUBACKs wait for: at 1,000 totes' single readings the writer's own checkpoint stalled a
 *   commit by 20-40 ms every few dozen commits and took about a third of the sink's CPU. The
 *   worker also lets the WAL start over (LEVEL_AT_BYTES), which the writer's own checkpoint did
 *   at the price of a 100–250 ms commit every few seconds.
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
CREATE TABLE IF NOT EXISTS binding_spans (
  binding_key INTEGER NOT NULL,
  tote_key    INTEGER NOT NULL,
  from_ts     INTEGER NOT NULL,
  to_ts       INTEGER NOT NULL,
  PRIMARY KEY (binding_key, tote_key)
) WITHOUT ROWID;
`

/** Files written before binding_spans: derive the spans from the old index once, then drop it. */
const MIGRATE_BINDING_INDEX = `
INSERT INTO binding_spans (binding_key, tote_key, from_ts, to_ts)
  SELECT binding_key, tote_key, min(ts), max(ts) FROM readings WHERE binding_key IS NOT NULL GROUP BY binding_key, tote_key
  ON CONFLICT (binding_key, tote_key) DO UPDATE SET from_ts = min(from_ts, excluded.from_ts), to_ts = max(to_ts, excluded.to_ts);
DROP INDEX readings_by_binding;
`
/**
 * How far a new or widened span reaches beyond the reading that widened it, ms: spans are
 * rewritten about once per hour of a delivery's readings, and a trace reads at most an hour of
 * the tote's readings from a neighbouring delivery (filtered out by binding_key).
 */
const SPAN_PADDING_MS = 3_600_000

const COLUMNS = 'tote_key, ts, binding_key, temp_c, battery, humidity, lat, lng, seq, received_at, late'
const PARAMS_PER_ROW = 11
/** Rows per INSERT statement: fewer statement steps, within SQLite's 32766 bound parameters. */
const ROWS_PER_STATEMENT = 100
/** Dictionary entries kept in memory; a binding is one delivery, so this bounds a long-running process. */
const MAX_CACHED_KEYS = 100_000
/**
 * When the WAL should start over: under steady writes the worker's checkpoints never end level
 * with the writer, and only a checkpoint that does lets the WAL start from its beginning again.
 * Past this the worker catches up and `write` pauses for its last, short pass
 * (store/wal-checkpointer.ts). 20,000 single readings/s write ~100 MiB of WAL a second (each
 * dirties its tote's leaf of the (tote_key, ts) index): a pause every ~1.1 s under that load,
 * 4–11 ms (batches: 2–5 ms). Twice this held the writer's p99 no better and let the WAL reach the
 * writer's own threshold.
 */
const LEVEL_AT_BYTES = 64 * 1024 * 1024
/**
 * The writer's own automatic checkpoint, inside a commit, in case the worker cannot level the
 * WAL (it died, or the disk is too slow for it to catch up). It copies every page the worker
 * has not: up to a second's pages, 100–250 ms at 15,000 single readings/s, which was every
 * PUBACK's p99 before the worker leveled the WAL itself.
 */
const WRITER_AUTOCHECKPOINT_BYTES = 256 * 1024 * 1024
/**
 * Once the WAL restarts, a file grown past this (by a burst beyond the writer's threshold) is cut
 * back to it. Not lower: truncating a few hundred MiB of WAL stalls the commit doing it by ~200 ms.
 */
const WAL_SIZE_LIMIT_BYTES = 320 * 1024 * 1024
/**
 * 4 KiB pages for new files. Each commit writes every page it dirtied to the WAL, and a single
 * reading dirties one leaf page of the (tote_key, ts) index (its tote's newest entries), so WAL
 * bytes per reading are about a page (two while readings_by_binding existed, when this was
 * chosen: with months of history per tote, 1,000 totes sending single readings cost 47 µs/row
 * with 16 KiB pages and 24 µs/row with 4 KiB, in-process on a loaded 2-core machine); 10,000-row
 * sorted batches are ~10 % slower with 4 KiB. 1 and 2 KiB were measured too (docs/performance.md).
 * The 64 MiB cache holds 16,384 of them: the index paths of tens of thousands of active totes.
 */
const PAGE_SIZE = 4096

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
  if (path !== ':memory:') {
    ensurePrivateDataDir(dirname(path))
    createPrivateFile(path) // 0600, and the -wal and -shm files SQLite makes beside it
  }
  const db = new Database(path)
  db.pragma(`page_size = ${PAGE_SIZE}`) // only takes effect on a new file, before WAL is switched on
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.pragma('cache_size = -65536')
  db.exec(SCHEMA)
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'readings_by_binding'").get()) {
    db.transaction(() => db.exec(MIGRATE_BINDING_INDEX))()
  }
  const keys = createKeyDictionary(db, MAX_CACHED_KEYS)
  const spans = createSpanWriter(db)
  const checkpointer = checkpointOffThread(db, path, {
    levelAtBytes: LEVEL_AT_BYTES,
    writerCheckpointBytes: WRITER_AUTOCHECKPOINT_BYTES,
    walSizeLimitBytes: WAL_SIZE_LIMIT_BYTES,
  })

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
    const toteKey = keys.toteKey(r.tote_id)
    const bindingKey = keys.bindingKey(r.delivery_id, r.rx_id)
    if (bindingKey !== null) spans.cover(bindingKey, toteKey, r.ts)
    target[at] = toteKey
    target[at + 1] = r.ts
    target[at + 2] = bindingKey
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

  // Attribution after the fact: ranges of the (tote_key, ts) index, so a tote's history is not scanned.
  const attach = db.prepare<[number, number, number, number]>(
    'UPDATE readings SET binding_key = ? WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key IS NULL',
  )
  const detach = db.prepare<[number, number, number, number]>(
    'UPDATE readings SET binding_key = NULL WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ?',
  )
  const attachedRange = db.prepare<[number, number, number, number], { first: number | null; last: number | null }>(
    'SELECT min(ts) AS first, max(ts) AS last FROM readings WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ?',
  )
  const attributeAll = db.transaction((toteId: string, deliveryId: string, rxId: string, fromMs: number, toMs: number) => {
    const toteKey = keys.toteKey(toteId)
    const bindingKey = keys.bindingKey(deliveryId, rxId)!
    const span = spans.of(bindingKey, toteKey)
    if (span !== null) {
      detach.run(toteKey, span.from_ts, fromMs, bindingKey)
      detach.run(toteKey, toMs, span.to_ts + 1, bindingKey)
    }
    if (attach.run(bindingKey, toteKey, fromMs, toMs).changes === 0) return false
    // binding_spans must cover every row of the binding (readingsForDelivery reads through them).
    const { first, last } = attachedRange.get(toteKey, fromMs, toMs, bindingKey)!
    spans.cover(bindingKey, toteKey, first!)
    spans.cover(bindingKey, toteKey, last!)
    return true
  })

  // A delivery's readings: for each of its spans (one per tote; one in practice), a range of the
  // (tote_key, ts) index, keeping the rows of that binding. In index order: no sort.
  const spansOf = db.prepare<[string], Span>(
    'SELECT s.binding_key, s.tote_key, s.from_ts, s.to_ts FROM binding_spans s JOIN bindings b ON b.binding_key = s.binding_key WHERE b.delivery_id = ?',
  )
  const inSpan = 'r.tote_key = ? AND r.ts >= ? AND r.ts < ? AND r.binding_key = ?'
  const bySpan = db.prepare<[number, number, number, number], StoredRow>(`${SELECT_ROWS} WHERE ${inSpan} ORDER BY r.ts`)
  const byTote = db.prepare<[string, number, number], StoredRow>(
    `${SELECT_ROWS} WHERE r.tote_key = (SELECT tote_key FROM totes WHERE tote_id = ?) AND r.ts >= ? AND r.ts < ? ORDER BY r.ts`,
  )
  // better-sqlite3 binds JS numbers as REAL, so `ts / step` would not truncate; `%` always does.
  const bucketsOfSpan = db.prepare<[number, number, number, number, number], TemperatureBucket>(`
    SELECT r.ts - r.ts % ? AS t, min(r.temp_c) AS min, max(r.temp_c) AS max, avg(r.temp_c) AS avg, count(*) AS n
    FROM readings r WHERE ${inSpan}
    GROUP BY t ORDER BY t`)
  /** The query's arguments for each span of the delivery, clipped to [fromMs, toMs). */
  const spanRanges = (deliveryId: string, fromMs: number, toMs: number) =>
    spansOf
      .all(deliveryId)
      .map((s) => [s.tote_key, Math.max(bound(fromMs), s.from_ts), Math.min(bound(toMs), s.to_ts + 1), s.binding_key] as const)
  const countAll = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM readings')

  const toRow = (r: StoredRow): ReadingRow => ({ ...r, late: r.late === 1 })
  // ±Infinity would bind as NULL and match nothing; callers use them for "unbounded".
  const bound = (ms: number) => Math.min(Math.max(ms, Number.MIN_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)

  return {
    async write(rows) {
      if (rows.length === 0) return
      // Held while the worker levels the WAL. GroupCommitter writes one group at a time; another
      // write meanwhile (attribute(), rare) would only cost this restart, never data.
      if (checkpointer?.levelWanted) await checkpointer.level()
      try {
        writeAll(rows)
      } catch (err) {
        keys.forget() // the rollback also removed any dictionary rows this write added
        spans.forget() // and any span it widened
        throw err
      }
    },
    async attribute(toteId, { deliveryId, rxId, fromMs, toMs }) {
      try {
        return attributeAll(toteId, deliveryId, rxId, bound(fromMs), bound(toMs ?? Infinity))
      } catch (err) {
        keys.forget()
        spans.forget()
        throw err
      }
    },
    async readingsForDelivery(deliveryId, fromMs, toMs) {
      const parts = spanRanges(deliveryId, fromMs, toMs).map((args) => bySpan.all(...args))
      const rows = parts.length === 1 ? parts[0]! : parts.flat().sort((a, b) => a.ts - b.ts)
      return rows.map(toRow)
    },
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      const parts = spanRanges(deliveryId, fromMs, toMs).map((args) => bucketsOfSpan.all(stepMs, ...args))
      return parts.length === 1 ? parts[0]! : mergeBuckets(parts.flat())
    },
    async readingsForTote(toteId, fromMs, toMs) {
      return byTote.all(toteId, bound(fromMs), bound(toMs)).map(toRow)
    },
    async count() {
      return countAll.get()!.n
    },
    async close() {
      await checkpointer?.stop()
      if (db.open) db.close()
    },
  }
}

const byToteThenTs = (a: ReadingRow, b: ReadingRow) => (a.tote_id < b.tote_id ? -1 : a.tote_id > b.tote_id ? 1 : a.ts - b.ts)

type Span = { binding_key: number; tote_key: number; from_ts: number; to_ts: number }

/** Keeps binding_spans covering every written reading; runs inside the write transaction. */
function createSpanWriter(db: Database.Database) {
  const find = db.prepare<[number, number], Span>('SELECT * FROM binding_spans WHERE binding_key = ? AND tote_key = ?')
  const save = db.prepare<
    [number, number, number, number]
  >(`INSERT INTO binding_spans (binding_key, tote_key, from_ts, to_ts) VALUES (?, ?, ?, ?)
    ON CONFLICT (binding_key, tote_key) DO UPDATE SET from_ts = min(from_ts, excluded.from_ts), to_ts = max(to_ts, excluded.to_ts)`)
  // binding_key → its spans (one per tote that reported for it: one in practice). Bounded crudely, as the key dictionary.
  const cache = new Map<number, Span[]>()
  return {
    cover(bindingKey: number, toteKey: number, ts: number): void {
      let ofBinding = cache.get(bindingKey)
      let span: Span | undefined
      if (ofBinding !== undefined) for (const s of ofBinding) if (s.tote_key === toteKey) span = s // no closure per row
      if (span === undefined) {
        span = find.get(bindingKey, toteKey) ?? { binding_key: bindingKey, tote_key: toteKey, from_ts: ts, to_ts: ts - 1 }
        if (ofBinding === undefined) {
          if (cache.size >= MAX_CACHED_KEYS) cache.clear()
          cache.set(bindingKey, (ofBinding = []))
        }
        ofBinding.push(span)
      }
      if (ts >= span.from_ts && ts <= span.to_ts) return
      if (ts < span.from_ts || span.to_ts < span.from_ts) span.from_ts = Math.min(span.from_ts, ts - SPAN_PADDING_MS)
      if (ts > span.to_ts) span.to_ts = ts + SPAN_PADDING_MS
      save.run(bindingKey, toteKey, span.from_ts, span.to_ts)
    },
    /** The binding's span on this tote, if it has readings. */
    of(bindingKey: number, toteKey: number): Span | null {
      return cache.get(bindingKey)?.find((s) => s.tote_key === toteKey) ?? find.get(bindingKey, toteKey) ?? null
    },
    /** The write rolled back: what it saved is gone, so re-read spans from the file. */
    forget(): void {
      cache.clear()
    },
  }
}

/** Buckets of one delivery read span by span (it had more than one tote), merged per step. */
function mergeBuckets(buckets: TemperatureBucket[]): TemperatureBucket[] {
  const byStart = new Map<number, TemperatureBucket>()
  for (const b of buckets) {
    const seen = byStart.get(b.t)
    if (seen === undefined) byStart.set(b.t, { ...b })
    else {
      seen.avg = (seen.avg * seen.n + b.avg * b.n) / (seen.n + b.n)
      seen.n += b.n
      seen.min = Math.min(seen.min, b.min)
      seen.max = Math.max(seen.max, b.max)
    }
  }
  return [...byStart.values()].sort((a, b) => a.t - b.t)
}
