import { setTimeout as pause } from 'node:timers/promises'
import type { Statement } from 'better-sqlite3'
import { assertStep, type ReadingRow, type ReadingSink, type TemperatureBucket } from './sink.js'
import { createCompaction, READING_COLUMNS, type StoredReading, type TimesAndTemperatures } from './sqlite-compaction.js'
import { chunkReadingOf } from './sqlite-chunk.js'
import { createKeyDictionary } from './sqlite-dictionary.js'
import { createExpiry } from './sqlite-expiry.js'
import { chunkTable, DAY_MS, dayOf, migrateLegacyReadings, openPartitions, rowTable } from './sqlite-partitions.js'
import { openReadingsFile } from './sqlite-readings-file.js'
import { createSpanWriter, type Span } from './sqlite-spans.js'

/**
 * Readings in their own SQLite file (not the entity store's: the write rate is orders of
 * magnitude higher and must not hold the entity store's write lock).
 *
 * - Partitioned by UTC day of `ts` (sqlite-partitions.ts): today's readings are rows of a
 *   table whose UNIQUE (tote_key, ts) is the dedup key and the only index, serving
 *   `readingsForTote` and the delivery trace (a delivery's readings are one tote's readings over
 *   a span of time, see binding_spans); ended days are compacted into chunks
 *   (sqlite-compaction.ts, ~10 bytes a reading); expiry drops whole days (sqlite-expiry.ts).
 * - Ids are dictionary-encoded: `totes` and `bindings` (delivery_id, rx_id) map the 29-character
 *   ids to small integers. In the comparison that chose this schema, text keys wrote about half
 *   as many rows/s.
 * - `binding_spans` holds, per binding and tote, a ts range padded by an hour that covers all its
 *   readings; the writer widens it when a reading falls outside (about once an hour per
 *   delivery). It replaced an index on (binding_key, ts): single readings from many totes dirty
 *   one leaf page per index per reading, and every dirty page is written to the WAL at commit, so
 *   the second index doubled the WAL (~80 MB/s at 10k readings/s) and cost a third of the CPU.
 * - Each batch is inserted in (tote, ts) order, and a 64 MiB cache keeps the leaf pages of
 *   thousands of active totes in memory (4 KiB pages, see PAGE_SIZE in sqlite-readings-file.ts).
 * - WAL + synchronous=NORMAL: a committed write survives a crash of the process; after a power
 *   loss the last transactions may roll back (SQLite docs, "WAL mode ... synchronous=NORMAL").
 *   The embedded default trades that for the commit rate; QuestDB is the durable option.
 * - WAL checkpoints run on a worker thread (store/wal-checkpointer.ts), not inside the commits
 *   that PUBACKs wait for: at 1,000 totes' single readings the writer's own checkpoint stalled a
 *   commit by 20-40 ms every few dozen commits and took about a third of the sink's CPU. The
 *   worker also lets the WAL start over (LEVEL_AT_BYTES, sqlite-readings-file.ts), which the
 *   writer's own checkpoint did at the price of a 100–250 ms commit every few seconds.
 */

const PARAMS_PER_ROW = 11
/** Rows per INSERT statement: fewer statement steps, within SQLite's 32766 bound parameters. */
const ROWS_PER_STATEMENT = 100
/** Dictionary entries kept in memory; a binding is one delivery, so this bounds a long-running process. */
const MAX_CACHED_KEYS = 100_000
/** How often the sink looks for ended days to compact. */
const COMPACT_EVERY_MS = 60_000
/**
 * Rows per compaction transaction, and the pause between two: a pass costs ~20 µs a row on a
 * loaded 2-core machine (bench:storage), so 1,000 rows hold the writer ~20 ms at worst, and
 * with the pause compaction takes at most about a quarter of a core while it catches up
 * (~14,000 rows/s; a day of 10,000 totes once a minute is 14.4 million rows, ~20 minutes).
 */
const COMPACT_BATCH = 1_000
const COMPACT_PAUSE_MS = 50

export type SqliteSinkOptions = {
  /** A file path, or ':memory:' (tests). */
  path: string
  /** Background compaction of ended days (default on); false leaves it to `compact()` (tests, benchmarks). */
  compaction?: boolean
  /** The clock compaction judges "ended" by. */
  now?: () => number
  /** How often background compaction looks for ended days (tests shorten it). */
  compactEveryMs?: number
}

export type SqliteReadingSink = ReadingSink & {
  /** One compaction pass (sqlite-compaction.ts); `nowMs` decides which days have ended. */
  compact(options?: { nowMs?: number; maxReadings?: number }): Promise<{ readings: number; more: boolean }>
}

type Row = Omit<StoredReading, 'late'> & { late: 0 | 1 }

export function createSqliteSink({
  path,
  compaction: compactInBackground = true,
  now = Date.now,
  compactEveryMs = COMPACT_EVERY_MS,
}: SqliteSinkOptions): SqliteReadingSink {
  const { db, checkpointer } = openReadingsFile(path)
  const partitions = openPartitions(db)
  migrateLegacyReadings(db, partitions)
  const keys = createKeyDictionary(db, MAX_CACHED_KEYS)
  const spans = createSpanWriter(db, MAX_CACHED_KEYS)
  const compaction = createCompaction(db, partitions)
  const expiry = createExpiry(db, partitions)

  const values = (n: number) => Array.from({ length: n }, () => `(${'?,'.repeat(PARAMS_PER_ROW - 1)}?)`).join(',')
  // ON CONFLICT DO NOTHING rather than INSERT OR IGNORE: OR IGNORE would also silently skip a
  // row that breaks NOT NULL; the upsert clause ignores only the (tote_key, ts) duplicate.
  const insert = (day: number, n: number) =>
    partitions.statement(
      rowTable(day),
      `insert-${n}`,
      () => `INSERT INTO ${rowTable(day)} (tote_key, ${READING_COLUMNS}) VALUES ${values(n)} ON CONFLICT (tote_key, ts) DO NOTHING`,
    )
  const manyParams: unknown[] = new Array(PARAMS_PER_ROW * ROWS_PER_STATEMENT)
  const oneParams: unknown[] = new Array(PARAMS_PER_ROW)

  /** Writes a row's parameters in column order at `at`, reusing one array for every statement. */
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

  // The day being written (today, nearly always) and its two inserts, looked up once per write.
  let current: { day: number; generation: number; many: Statement; one: Statement } | null = null
  const insertsOf = (day: number) => {
    if (current?.day !== day || current.generation !== partitions.generation()) {
      partitions.ensureRows(day)
      current = { day, generation: partitions.generation(), many: insert(day, ROWS_PER_STATEMENT), one: insert(day, 1) }
    }
    return current
  }

  /** Inserts one day's rows, sorted by (tote, ts), into its row table. */
  const insertDay = (day: number, rows: readonly ReadingRow[]) => {
    const { many, one } = insertsOf(day)
    if (partitions.get(day)!.chunks) rows = notYetChunked(day, rows)
    let i = 0
    for (; i + ROWS_PER_STATEMENT <= rows.length; i += ROWS_PER_STATEMENT) {
      for (let k = 0; k < ROWS_PER_STATEMENT; k++) bindRow(rows[i + k]!, manyParams, k * PARAMS_PER_ROW)
      many.run(manyParams)
    }
    for (; i < rows.length; i++) {
      bindRow(rows[i]!, oneParams, 0)
      one.run(oneParams)
    }
  }

  /** A late reading for a compacted day is stored once: not again beside the chunk that holds it. */
  const notYetChunked = (day: number, rows: readonly ReadingRow[]) => {
    const held = new Map<string, Set<number>>()
    for (const r of rows) {
      if (held.has(r.tote_id)) continue
      const { ts } = compaction.readTimesAndTemperatures(day, keys.toteKey(r.tote_id), day * DAY_MS, (day + 1) * DAY_MS)
      held.set(r.tote_id, new Set(ts))
    }
    return rows.filter((r) => !held.get(r.tote_id)!.has(r.ts))
  }

  // One transaction per write(): 10,000 rows commit (and sync the WAL) once.
  const writeAll = db.transaction((input: readonly ReadingRow[]) => {
    // In (tote, ts) order, consecutive inserts land on the same leaf pages instead of hopping
    // between a thousand totes' pages: ~1.5x the rows/s, sort included.
    const rows = input.length === 1 ? input : [...input].sort(byToteThenTs)
    const first = dayOf(rows[0]!.ts)
    const from = first * DAY_MS
    const to = from + DAY_MS
    let oneDay = true
    for (const r of rows) if (r.ts < from || r.ts >= to) oneDay = false
    if (oneDay) return insertDay(first, rows)
    const byDay = new Map<number, ReadingRow[]>()
    for (const r of rows) {
      const day = dayOf(r.ts)
      const ofDay = byDay.get(day)
      if (ofDay === undefined) byDay.set(day, [r])
      else ofDay.push(r)
    }
    for (const [day, ofDay] of byDay) insertDay(day, ofDay)
  })

  /** Adds rows (of one tote, with their binding) to a day's row table: chunks turned back into rows. */
  const insertStored = (day: number, toteKey: number, rows: readonly StoredReading[]) => {
    partitions.ensureRows(day)
    const one = insert(day, 1)
    for (const r of rows) {
      one.run(toteKey, r.ts, r.binding_key, r.temp_c, r.battery, r.humidity, r.lat, r.lng, r.seq, r.received_at, r.late ? 1 : 0)
    }
  }

  /** Runs `statement(day)` with `args` on each row table that [fromMs, toMs) touches; total changes. */
  const eachRowTable = (
    fromMs: number,
    toMs: number,
    purpose: string,
    sql: (table: string) => string,
    args: (from: number, to: number) => unknown[],
  ) => {
    let changes = 0
    for (const day of partitions.covering(fromMs, toMs)) {
      if (!partitions.get(day)?.rows) continue
      const from = Math.max(fromMs, day * DAY_MS)
      const to = Math.min(toMs, (day + 1) * DAY_MS)
      changes += partitions.statement(rowTable(day), purpose, () => sql(rowTable(day))).run(...args(from, to)).changes
    }
    return changes
  }

  // Attribution after the fact: ranges of the (tote_key, ts) key, so a tote's history is not
  // scanned; the chunks the ranges touch become rows first (compaction packs them again later).
  const attributeAll = db.transaction((toteId: string, deliveryId: string, rxId: string, fromMs: number, toMs: number) => {
    const toteKey = keys.toteKey(toteId)
    const bindingKey = keys.bindingKey(deliveryId, rxId)!
    const span = spans.of(bindingKey, toteKey)
    if (span !== null) {
      for (const [from, to] of [
        [span.from_ts, fromMs],
        [toMs, span.to_ts + 1],
      ] as const) {
        if (to <= from) continue
        compaction.uncompact(toteKey, from, to, bindingKey, insertStored)
        eachRowTable(
          from,
          to,
          'detach',
          (t) => `UPDATE ${t} SET binding_key = NULL WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ?`,
          (f, t) => [toteKey, f, t, bindingKey],
        )
      }
    }
    compaction.uncompact(toteKey, fromMs, toMs, null, insertStored)
    const attached = eachRowTable(
      fromMs,
      toMs,
      'attach',
      (t) => `UPDATE ${t} SET binding_key = ? WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key IS NULL`,
      (f, t) => [bindingKey, toteKey, f, t],
    )
    if (attached === 0) return false
    // binding_spans must cover every row of the binding (readingsForDelivery reads through them).
    for (const day of partitions.covering(fromMs, toMs)) {
      if (!partitions.get(day)?.rows) continue
      const { first, last } = partitions
        .statement(
          rowTable(day),
          'attached-range',
          () =>
            `SELECT min(ts) AS first, max(ts) AS last FROM ${rowTable(day)} WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ?`,
        )
        .get(toteKey, fromMs, toMs, bindingKey) as { first: number | null; last: number | null }
      if (first !== null) spans.cover(bindingKey, toteKey, first)
      if (last !== null) spans.cover(bindingKey, toteKey, last)
    }
    return true
  })

  const spansOf = db.prepare<[string], Span & { tote_id: string; delivery_id: string; rx_id: string | null }>(
    `SELECT s.binding_key, s.tote_key, s.from_ts, s.to_ts, t.tote_id, b.delivery_id, b.rx_id
     FROM binding_spans s JOIN bindings b ON b.binding_key = s.binding_key JOIN totes t ON t.tote_key = s.tote_key
     WHERE b.delivery_id = ?`,
  )
  const toteKeyOf = db.prepare<[string], { k: number }>('SELECT tote_key AS k FROM totes WHERE tote_id = ?')
  const one = db.prepare('SELECT 1')
  const bindingOf = db.prepare<[number], { delivery_id: string | null; rx_id: string | null }>(
    'SELECT delivery_id, rx_id FROM bindings WHERE binding_key = ?',
  )

  /** A tote's readings in [fromMs, toMs), all or one binding's, ts order: only the days the range touches. */
  const readTote = (toteKey: number, fromMs: number, toMs: number, bindingKey?: number): StoredReading[] => {
    const out: StoredReading[] = []
    for (const day of partitions.covering(fromMs, toMs)) {
      const entry = partitions.get(day)!
      const from = Math.max(fromMs, day * DAY_MS)
      const to = Math.min(toMs, (day + 1) * DAY_MS)
      const rows = entry.rows ? rowsOfDay(day, toteKey, from, to, bindingKey) : []
      const chunked = entry.chunks ? compaction.readChunks(day, toteKey, from, to, bindingKey) : []
      if (chunked.length === 0) out.push(...rows)
      else if (rows.length === 0) out.push(...chunked)
      else out.push(...[...rows, ...chunked].sort((a, b) => a.ts - b.ts))
    }
    return out
  }
  const rowsOfDay = (day: number, toteKey: number, from: number, to: number, bindingKey?: number): StoredReading[] => {
    const t = rowTable(day)
    const rows =
      bindingKey === undefined
        ? (partitions
            .statement(t, 'of-tote', () => `SELECT ${READING_COLUMNS} FROM ${t} WHERE tote_key = ? AND ts >= ? AND ts < ? ORDER BY ts`)
            .all(toteKey, from, to) as Row[])
        : (partitions
            .statement(
              t,
              'of-binding',
              () => `SELECT ${READING_COLUMNS} FROM ${t} WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ? ORDER BY ts`,
            )
            .all(toteKey, from, to, bindingKey) as Row[])
    for (const r of rows) (r as unknown as StoredReading).late = r.late === 1
    return rows as unknown as StoredReading[]
  }

  /**
   * A binding's newest reading in [from, to): the newest day that holds one settles it, with one
   * indexed row and that day's chunks of the tote read, however long the range (a custody event's
   * handoff temperature).
   */
  const lastOfSpan = (toteKey: number, from: number, to: number, bindingKey: number): StoredReading | null => {
    for (const day of partitions.covering(from, to).reverse()) {
      const entry = partitions.get(day)!
      const dayFrom = Math.max(from, day * DAY_MS)
      const dayTo = Math.min(to, (day + 1) * DAY_MS)
      const t = rowTable(day)
      const row = entry.rows
        ? (partitions
            .statement(
              t,
              'last-of-binding',
              () =>
                `SELECT ${READING_COLUMNS} FROM ${t} WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ? ORDER BY ts DESC LIMIT 1`,
            )
            .get(toteKey, dayFrom, dayTo, bindingKey) as Row | undefined)
        : undefined
      const chunked = entry.chunks ? compaction.readChunks(day, toteKey, dayFrom, dayTo, bindingKey).at(-1) : undefined
      const last = row ? Object.assign(row as unknown as StoredReading, { late: row.late === 1 }) : undefined
      const newest = last && chunked ? (last.ts > chunked.ts ? last : chunked) : (last ?? chunked)
      if (newest) return newest
    }
    return null
  }

  /** The query's arguments for each span of the delivery, clipped to [fromMs, toMs). */
  const spanRanges = (deliveryId: string, fromMs: number, toMs: number) =>
    spansOf.all(deliveryId).map((s) => ({ ...s, from: Math.max(bound(fromMs), s.from_ts), to: Math.min(bound(toMs), s.to_ts + 1) }))

  // better-sqlite3 binds JS numbers as REAL, so `ts / step` would not truncate; `%` always does.
  const bucketsOfDay = (day: number, stepMs: number, toteKey: number, from: number, to: number, bindingKey: number) =>
    partitions
      .statement(
        rowTable(day),
        'buckets',
        () => `SELECT ts - ts % ? AS t, min(temp_c) AS min, max(temp_c) AS max, avg(temp_c) AS avg, count(*) AS n
               FROM ${rowTable(day)} WHERE tote_key = ? AND ts >= ? AND ts < ? AND binding_key = ? GROUP BY t ORDER BY t`,
      )
      .all(stepMs, toteKey, from, to, bindingKey) as TemperatureBucket[]

  const bound = (ms: number) => Math.min(Math.max(ms, Number.MIN_SAFE_INTEGER), Number.MAX_SAFE_INTEGER)
  const undo = () => {
    keys.forget() // the rollback also removed any dictionary rows this write added
    spans.forget() // and any span it widened
    partitions.reload() // and any table it created or dropped
  }

  /**
   * Whether background work (compaction, expiry) may write now: it first lets the worker level the
   * WAL when it has asked to, then waits while checkpoints are behind ingest, as its pages would
   * push the WAL on towards the writer's own checkpoint, which stalls ingest's commits.
   */
  const maintenanceMayWrite = async (): Promise<boolean> => {
    if (checkpointer?.levelWanted) await checkpointer.level()
    return !checkpointer?.behind
  }

  /** Passes until nothing is due, yielding to writes between transactions. */
  let compacting: Promise<void> | null = null
  let closed = false
  const compactDue = async () => {
    while (!closed) {
      if ((await maintenanceMayWrite()) && !pass({ nowMs: now(), maxReadings: COMPACT_BATCH }).more) return
      await pause(COMPACT_PAUSE_MS)
    }
  }
  const pass = (options: { nowMs: number; maxReadings: number }) => {
    try {
      return compaction.compact(options)
    } catch (err) {
      partitions.reload()
      throw err
    }
  }
  const timer = compactInBackground
    ? setInterval(() => {
        compacting ??= compactDue()
          .catch((err: unknown) => console.error('readings compaction failed; retried in a minute', err))
          .finally(() => (compacting = null))
      }, compactEveryMs).unref()
    : null

  return {
    async write(rows) {
      if (rows.length === 0) return
      // Held while the worker levels the WAL. GroupCommitter writes one group at a time; another
      // write meanwhile (attribute(), rare) would only cost this restart, never data.
      if (checkpointer?.levelWanted) await checkpointer.level()
      try {
        writeAll(rows)
      } catch (err) {
        undo()
        throw err
      }
    },
    async attribute(toteId, { deliveryId, rxId, fromMs, toMs }) {
      try {
        return attributeAll(toteId, deliveryId, rxId, bound(fromMs), bound(toMs ?? Infinity))
      } catch (err) {
        undo()
        throw err
      }
    },
    async readingsForDelivery(deliveryId, fromMs, toMs) {
      const parts = spanRanges(deliveryId, fromMs, toMs).map((s) =>
        readTote(s.tote_key, s.from, s.to, s.binding_key).map((r): ReadingRow => ({
          tote_id: s.tote_id,
          delivery_id: s.delivery_id,
          rx_id: s.rx_id,
          ...chunkReadingOf(r),
        })),
      )
      return parts.length === 1 ? parts[0]! : parts.flat().sort((a, b) => a.ts - b.ts)
    },
    async latestForDelivery(deliveryId, fromMs, toMs) {
      let newest: ReadingRow | null = null
      for (const s of spanRanges(deliveryId, fromMs, toMs)) {
        const last = lastOfSpan(s.tote_key, s.from, s.to, s.binding_key)
        if (last && (newest === null || last.ts > newest.ts))
          newest = { tote_id: s.tote_id, delivery_id: s.delivery_id, rx_id: s.rx_id, ...chunkReadingOf(last) }
      }
      return newest
    },
    async bucketed(deliveryId, fromMs, toMs, stepMs) {
      assertStep(stepMs)
      const parts: TemperatureBucket[][] = []
      for (const s of spanRanges(deliveryId, fromMs, toMs)) {
        for (const day of partitions.covering(s.from, s.to)) {
          const entry = partitions.get(day)!
          const from = Math.max(s.from, day * DAY_MS)
          const to = Math.min(s.to, (day + 1) * DAY_MS)
          if (entry.rows) parts.push(bucketsOfDay(day, stepMs, s.tote_key, from, to, s.binding_key))
          if (entry.chunks) parts.push(bucketsOf(compaction.readTimesAndTemperatures(day, s.tote_key, from, to, s.binding_key), stepMs))
        }
      }
      const nonEmpty = parts.filter((p) => p.length > 0)
      return nonEmpty.length <= 1 ? (nonEmpty[0] ?? []) : mergeBuckets(nonEmpty)
    },
    async readingsForTote(toteId, fromMs, toMs) {
      const toteKey = toteKeyOf.get(toteId)?.k
      if (toteKey === undefined) return []
      const names = new Map<number | null, { delivery_id: string | null; rx_id: string | null }>([
        [null, { delivery_id: null, rx_id: null }],
      ])
      return readTote(toteKey, bound(fromMs), bound(toMs)).map((r) => {
        let binding = names.get(r.binding_key)
        if (binding === undefined) names.set(r.binding_key, (binding = bindingOf.get(r.binding_key!) ?? { delivery_id: null, rx_id: null }))
        return { tote_id: toteId, ...binding, ...chunkReadingOf(r) }
      })
    },
    async ping() {
      one.get()
    },
    async count() {
      let n = 0
      for (const day of partitions.all()) {
        const entry = partitions.get(day)!
        if (entry.rows)
          n += (partitions.statement(rowTable(day), 'count', () => `SELECT count(*) AS n FROM ${rowTable(day)}`).get() as { n: number }).n
        if (entry.chunks)
          n += (
            partitions.statement(chunkTable(day), 'count', () => `SELECT coalesce(sum(n), 0) AS n FROM ${chunkTable(day)}`).get() as {
              n: number
            }
          ).n
      }
      return n
    },
    async expire(request) {
      if (!(await maintenanceMayWrite())) return { removed: 0, more: true, deferred: true } // the expirer comes back
      return expiry.expire(request, () => {
        partitions.reload()
      })
    },
    async compact({ nowMs = now(), maxReadings = COMPACT_BATCH } = {}) {
      if (checkpointer?.levelWanted) await checkpointer.level()
      return pass({ nowMs, maxReadings })
    },
    async close() {
      closed = true
      if (timer !== null) clearInterval(timer)
      await compacting
      await checkpointer?.stop()
      if (db.open) db.close()
    },
  }
}

const byToteThenTs = (a: ReadingRow, b: ReadingRow) => (a.tote_id < b.tote_id ? -1 : a.tote_id > b.tote_id ? 1 : a.ts - b.ts)

/**
 * Chunked readings (ts order) in steps of `stepMs`, as the row tables' GROUP BY gives them: the
 * sum compensated as SQLite's avg() does (Kahan-Babuska-Neumaier, SQLite 3.43), so a trace reads
 * the same to the last digit before and after its day is compacted.
 */
function bucketsOf({ ts, temps }: TimesAndTemperatures, stepMs: number): TemperatureBucket[] {
  const out: TemperatureBucket[] = []
  let sum = 0
  let error = 0
  const close = (b: TemperatureBucket | undefined) => {
    if (b !== undefined) b.avg = (sum + error) / b.n
  }
  let last: TemperatureBucket | undefined
  for (let i = 0; i < ts.length; i++) {
    const x = temps[i]!
    const at = ts[i]!
    // Usually the reading is in the bucket of the one before, which saves the remainder (of a
    // number past 32 bits: a call into V8's runtime). Not before 1970: the remainder of a
    // negative time rounds towards zero, so its bucket does not start at or before it.
    const t = last !== undefined && last.t >= 0 && at >= last.t && at < last.t + stepMs ? last.t : at - (at % stepMs)
    if (last === undefined || last.t !== t) {
      close(last)
      out.push((last = { t, min: x, max: x, avg: x, n: 1 }))
      sum = x
      error = 0
    } else {
      last.min = Math.min(last.min, x)
      last.max = Math.max(last.max, x)
      last.n++
      const s = sum + x
      error += Math.abs(sum) >= Math.abs(x) ? sum - s + x : x - s + sum
      sum = s
    }
  }
  close(last)
  return out
}

/**
 * Buckets of one delivery read in parts (more than one tote or day, rows and chunks), merged per
 * step. Each part is non-empty and in time order.
 */
function mergeBuckets(parts: TemperatureBucket[][]): TemperatureBucket[] {
  // Usually the parts are days one after the other, no step in two of them: nothing to merge.
  const all = ([] as TemperatureBucket[]).concat(...parts) // Array.prototype.flat is several times slower
  if (parts.every((part, i) => i === 0 || part[0]!.t > parts[i - 1]!.at(-1)!.t)) return all
  const byStart = new Map<number, TemperatureBucket>()
  for (const b of all) {
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
