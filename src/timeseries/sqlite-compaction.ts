import type Database from 'better-sqlite3'
import { chunkReadingOf, decodeChunk, decodeTimesAndTemperatures, encodeChunk, type ChunkReading } from './sqlite-chunk.js'
import { chunkTable, DAY_MS, rowTable, type Partitions } from './sqlite-partitions.js'

/**
 * Compaction: a day's row table, once the day has ended, becomes chunks (sqlite-partitions.ts).
 *
 * Rules:
 * - Only days that ended COMPACT_AFTER_MS ago or more are compacted; today's readings stay rows.
 * - A pass takes at most `maxReadings` rows, in (tote, ts) order, and turns each run of one
 *   tote's readings with one binding into chunks of up to CHUNK_READINGS, in one transaction:
 *   the chunks are inserted and exactly those rows deleted. A kill or a full disk in between
 *   rolls the whole pass back, leaving the rows as they were.
 * - The day's row table is dropped in the pass that empties it.
 * - A reading of a chunk never changes in place: re-binding it (attribute()) first turns the
 *   tote's chunks it touches back into rows (`uncompact`), and compaction packs them again later.
 */

/** A day's rows wait this long after its end for late readings before they are packed. */
const COMPACT_AFTER_MS = 3_600_000
/**
 * Readings per chunk. Near 1 KiB of blob: a few chunks share a 4 KiB page with no overflow
 * pages, the per-chunk columns and two index entries cost < 0.5 byte per reading, and a trace
 * decodes at most a chunk's worth beyond its range at each end.
 */
const CHUNK_READINGS = 128

export type StoredReading = ChunkReading & { binding_key: number | null }
type Row = Omit<StoredReading, 'late'> & { tote_key: number; late: 0 | 1 }
type ChunkRow = { rowid: number; tote_key: number; first_ts: number; n: number; binding_key: number | null; data: Buffer }

export const READING_COLUMNS = 'ts, binding_key, temp_c, battery, humidity, lat, lng, seq, received_at, late'

export function createCompaction(db: Database.Database, partitions: Partitions) {
  const insertChunk = (day: number) =>
    partitions.statement(
      chunkTable(day),
      'insert',
      () => `INSERT INTO ${chunkTable(day)} (tote_key, first_ts, last_ts, binding_key, n, data) VALUES (?, ?, ?, ?, ?, ?)`,
    )
  const deleteRange = (day: number) =>
    partitions.statement(rowTable(day), 'delete-range', () => `DELETE FROM ${rowTable(day)} WHERE tote_key = ? AND ts >= ? AND ts <= ?`)

  /** Stores one tote's readings of one binding (ts order) as chunks of the day. */
  const pack = (day: number, toteKey: number, bindingKey: number | null, readings: readonly ChunkReading[]) => {
    for (let i = 0; i < readings.length; i += CHUNK_READINGS) {
      const part = readings.slice(i, i + CHUNK_READINGS)
      insertChunk(day).run(toteKey, part[0]!.ts, part.at(-1)!.ts, bindingKey, part.length, encodeChunk(part))
    }
  }

  const compactDay = db.transaction((day: number, maxReadings: number): number => {
    partitions.ensureChunks(day)
    const rows = partitions
      .statement(rowTable(day), 'oldest', () => `SELECT tote_key, ${READING_COLUMNS} FROM ${rowTable(day)} ORDER BY tote_key, ts LIMIT ?`)
      .all(maxReadings) as Row[]
    let start = 0
    for (let i = 1; i <= rows.length; i++) {
      const a = rows[start]!
      const b = rows[i]
      if (b !== undefined && b.tote_key === a.tote_key && b.binding_key === a.binding_key) continue
      // rows[start..i) are every row of this tote between their first and last ts: the range delete takes exactly them.
      const run = rows.slice(start, i).map(chunkReadingOf)
      pack(day, a.tote_key, a.binding_key, run)
      deleteRange(day).run(a.tote_key, run[0]!.ts, run.at(-1)!.ts)
      start = i
    }
    if (rows.length < maxReadings) partitions.dropRows(day)
    return rows.length
  })

  const chunksOf = (day: number, toteKey: number, fromMs: number, toMs: number, bindingKey: number | null) =>
    partitions
      .statement(
        chunkTable(day),
        'of-tote-binding',
        () =>
          `SELECT rowid, tote_key, first_ts, n, binding_key, data FROM ${chunkTable(day)} WHERE tote_key = ? AND first_ts < ? AND last_ts >= ? AND binding_key IS ?`,
      )
      .all(toteKey, toMs, fromMs, bindingKey) as ChunkRow[]

  /** A tote's chunks of one day that may hold readings in [fromMs, toMs), of any binding or only `bindingKey`'s. */
  const chunksInRange = (day: number, toteKey: number, fromMs: number, toMs: number, bindingKey?: number) =>
    bindingKey === undefined
      ? (partitions
          .statement(
            chunkTable(day),
            'of-tote',
            () =>
              `SELECT first_ts, n, binding_key, data FROM ${chunkTable(day)} WHERE tote_key = ? AND first_ts < ? AND last_ts >= ? ORDER BY first_ts`,
          )
          .all(toteKey, toMs, fromMs) as ChunkRow[])
      : chunksOf(day, toteKey, fromMs, toMs, bindingKey)

  return {
    /**
     * One pass over the oldest day that is due. `readings` is how many rows it packed; `more`
     * whether any due day still has rows.
     */
    compact({ nowMs, maxReadings }: { nowMs: number; maxReadings: number }): { readings: number; more: boolean } {
      const due = partitions.all().filter((d) => partitions.get(d)?.rows && (d + 1) * DAY_MS + COMPACT_AFTER_MS <= nowMs)
      if (due.length === 0) return { readings: 0, more: false }
      const readings = compactDay(due[0]!, maxReadings)
      return { readings, more: due.length > 1 || partitions.get(due[0]!)?.rows === true }
    },
    /**
     * Turns the tote's chunks of `bindingKey` (null: unbound) that overlap [fromMs, toMs) back
     * into rows, so an UPDATE of the row tables reaches every reading in that range. Inside the
     * caller's transaction.
     */
    uncompact(
      toteKey: number,
      fromMs: number,
      toMs: number,
      bindingKey: number | null,
      insertRows: (day: number, toteKey: number, rows: readonly StoredReading[]) => void,
    ): void {
      for (const day of partitions.covering(fromMs, toMs)) {
        if (!partitions.get(day)?.chunks) continue
        for (const chunk of chunksOf(day, toteKey, fromMs, toMs, bindingKey)) {
          insertRows(day, toteKey, decodeChunk(chunk.first_ts, chunk.n, chunk.data, chunk.binding_key))
          partitions.statement(chunkTable(day), 'delete', () => `DELETE FROM ${chunkTable(day)} WHERE rowid = ?`).run(chunk.rowid)
        }
      }
    },
    /** A tote's chunked readings of one day in [fromMs, toMs), any binding or only `bindingKey`'s, ts order. */
    readChunks(day: number, toteKey: number, fromMs: number, toMs: number, bindingKey?: number): StoredReading[] {
      const found: StoredReading[] = []
      const chunks = chunksInRange(day, toteKey, fromMs, toMs, bindingKey)
      for (const chunk of chunks) {
        for (const r of decodeChunk(chunk.first_ts, chunk.n, chunk.data, chunk.binding_key)) {
          if (r.ts >= fromMs && r.ts < toMs) found.push(r)
        }
      }
      // Chunks of one tote overlap only when late readings were packed after the others.
      return chunks.length > 1 ? found.sort((a, b) => a.ts - b.ts) : found
    },
    /** The same readings' times and temperatures only (a trace's buckets, a tote's reading times), in ts order. */
    readTimesAndTemperatures(day: number, toteKey: number, fromMs: number, toMs: number, bindingKey?: number): TimesAndTemperatures {
      const ts: number[] = []
      const temps: number[] = []
      for (const chunk of chunksInRange(day, toteKey, fromMs, toMs, bindingKey)) {
        decodeTimesAndTemperatures(chunk.first_ts, chunk.n, chunk.data, ts, temps)
      }
      return inOrder(ts, temps, fromMs, toMs)
    },
  }
}

/** Readings' times and temperatures as two arrays, the same index in each for one reading. */
export type TimesAndTemperatures = { ts: number[]; temps: number[] }

/**
 * The readings of [fromMs, toMs), in ts order. Chunks of one tote overlap only when late readings
 * were packed after the others: then sorted (a stable sort, as `readChunks` does).
 */
function inOrder(ts: number[], temps: number[], fromMs: number, toMs: number): TimesAndTemperatures {
  let sorted = true
  for (let i = 1; i < ts.length && sorted; i++) sorted = ts[i]! >= ts[i - 1]!
  if (sorted) {
    // The first and last chunks may reach outside the window; what is inside is one run.
    let from = 0
    let to = ts.length
    while (from < to && ts[from]! < fromMs) from++
    while (to > from && ts[to - 1]! >= toMs) to--
    return from === 0 && to === ts.length ? { ts, temps } : { ts: ts.slice(from, to), temps: temps.slice(from, to) }
  }
  const order = [...ts.keys()].filter((i) => ts[i]! >= fromMs && ts[i]! < toMs).sort((a, b) => ts[a]! - ts[b]!)
  return { ts: order.map((i) => ts[i]!), temps: order.map((i) => temps[i]!) }
}
