import { assertStep, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'
import { createKeyDictionary } from './sqlite-dictionary.js'
import { openReadingsFile } from './sqlite-readings-file.js'
import { createSpanWriter, type Span } from './sqlite-spans.js'

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
 *   PAGE_SIZE in sqlite-readings-file.ts).
 * - WAL + synchronous=NORMAL: a committed write survives a crash of the process; after a power
 *   loss the last transactions may roll back (SQLite docs, "WAL mode ... synchronous=NORMAL").
 *   The embedded default trades that for the commit rate; QuestDB is the durable option.
 * - WAL checkpoints run on a worker thread (store/wal-checkpointer.ts), not inside the commits
 *   that PUBACKs wait for: at 1,000 totes' single readings the writer's own checkpoint stalled a
 *   commit by 20-40 ms every few dozen commits and took about a third of the sink's CPU. The
 *   worker also lets the WAL start over (LEVEL_AT_BYTES, sqlite-readings-file.ts), which the
 *   writer's own checkpoint did at the price of a 100–250 ms commit every few seconds.
 */

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
  const { db, checkpointer } = openReadingsFile(path)
  const keys = createKeyDictionary(db, MAX_CACHED_KEYS)
  const spans = createSpanWriter(db, MAX_CACHED_KEYS)

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
  const lastOfSpan = db.prepare<[number, number, number, number], StoredRow>(`${SELECT_ROWS} WHERE ${inSpan} ORDER BY r.ts DESC LIMIT 1`)
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
    async latestForDelivery(deliveryId, fromMs, toMs) {
      const lasts = spanRanges(deliveryId, fromMs, toMs).flatMap((args) => lastOfSpan.get(...args) ?? [])
      const newest = lasts.reduce<StoredRow | null>((best, r) => (best === null || r.ts > best.ts ? r : best), null)
      return newest && toRow(newest)
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
