import type Database from 'better-sqlite3'
import type { ExpiryRequest, ExpiryResult } from './sink.js'
import { decodeChunk, encodeChunk } from './sqlite-chunk.js'
import { chunkTable, DAY_MS, rowTable, type Partitions } from './sqlite-partitions.js'

/**
 * Expiry on the SQLite readings file (ExpiryRequest, sink.ts), day by day, oldest first, one
 * transaction per day and pass:
 *
 * - A day that ended before both cut-offs and holds no reading of a kept delivery is emptied,
 *   at most EMPTYING_ROWS stored rows a batch (a chunk counts as one), and its tables then dropped.
 * - Otherwise, for each binding in the day (found through the chunk table's binding index, or a
 *   scan of a row table not compacted yet) whose readings may go — none (unbound) before
 *   `unboundBeforeMs`; a delivery's not in `keepDeliveries` before `boundBeforeMs` — its chunks
 *   wholly before the cut-off are deleted, a chunk across the cut-off is rewritten without its
 *   older readings, and its rows before the cut-off are deleted; at most about `limit` readings.
 * - The binding is the one each reading has when the pass runs: attribute() re-binds stored
 *   readings (chunks included) in the same kind of transaction, so a pass never sees half of it.
 */

/**
 * Stored rows a batch empties of a day wholly past retention, at most. Each batch holds every
 * write for its duration: on a 2-core VM 250 chunk rows take ~1.4 ms, 1,000 ~4 ms, 5,000 ~16 ms
 * (docs/performance.md, bench:expiry); a day of 10,000 totes (~140,000 chunks) then goes in
 * ~2 minutes with the default pause.
 */
const EMPTYING_ROWS = 250

/**
 * Chunk heads read at a time while removing one binding's readings. A batch of 1,000 readings is
 * a handful of chunks; reading a head per reading of the budget, as before, cost ~1.2 ms of a
 * ~1.3 ms batch (docs/performance.md, bench:expiry).
 */
const HEADS_PER_READ = 32
/** Below every tote key: a read from the start of a binding's chunks. */
const FIRST_TOTE = Number.MIN_SAFE_INTEGER

/** The binding keys of the kept deliveries, as a set and as the JSON array SQLite's json_each reads. */
type KeptKeys = { keys: ReadonlySet<number>; json: string }

type ChunkHead = { rowid: number; tote_key: number; first_ts: number; last_ts: number; n: number }

export function createExpiry(db: Database.Database, partitions: Partitions) {
  // One statement for the whole set (a JSON array of ids), each id a seek of bindings_by_delivery.
  const keysOfDeliveries = db.prepare<[string], { k: number }>(
    'SELECT binding_key AS k FROM bindings WHERE delivery_id IN (SELECT value FROM json_each(?))',
  )
  const stmt = (table: string, purpose: string, sql: string) => partitions.statement(table, purpose, () => sql)

  const bindingsOfDay = (day: number): (number | null)[] => {
    const found = new Set<number | null>()
    const entry = partitions.get(day)!
    if (entry.chunks) {
      const t = chunkTable(day)
      for (const { b } of stmt(t, 'bindings', `SELECT DISTINCT binding_key AS b FROM ${t}`).all() as { b: number | null }[]) found.add(b)
    }
    if (entry.rows) {
      const t = rowTable(day)
      for (const { b } of stmt(t, 'bindings', `SELECT DISTINCT binding_key AS b FROM ${t}`).all() as { b: number | null }[]) found.add(b)
    }
    return [...found]
  }

  /**
   * Empties a day wholly past retention by at most `budget` stored rows (a chunk of up to 128
   * readings is one row), oldest first, and drops its tables once nothing is left. A DROP TABLE of
   * a whole day frees every page of it in one statement: hundreds of milliseconds for a day of a
   * large fleet, during which no write commits (bench:expiry); a batch of rows is a few.
   */
  const emptyDay = (day: number, budget: number): { removed: number; full: boolean } => {
    const entry = partitions.get(day)!
    let removed = 0
    let rowsLeft = budget
    if (entry.chunks) {
      const t = chunkTable(day)
      const oldest = stmt(t, 'oldest', `SELECT rowid, n FROM ${t} ORDER BY rowid LIMIT ?`).all(rowsLeft) as { rowid: number; n: number }[]
      if (oldest.length > 0) stmt(t, 'delete-through', `DELETE FROM ${t} WHERE rowid <= ?`).run(oldest.at(-1)!.rowid)
      for (const c of oldest) removed += c.n
      rowsLeft -= oldest.length
    }
    if (entry.rows && rowsLeft > 0) {
      const t = rowTable(day)
      const gone = stmt(t, 'delete-oldest', `DELETE FROM ${t} WHERE rowid IN (SELECT rowid FROM ${t} ORDER BY rowid LIMIT ?)`).run(
        rowsLeft,
      ).changes
      removed += gone
      rowsLeft -= gone
    }
    if (rowsLeft === 0) return { removed, full: true }
    // Both tables came up short of the budget: they are empty now, and dropping them costs nothing.
    partitions.dropRows(day)
    partitions.dropChunks(day)
    return { removed, full: false }
  }

  /**
   * Where a batch resumes a binding's sweep of a day whose binding index is tote-ordered
   * (sqlite-partitions.ts), by `day:binding`: there the chunks before a cut-off inside the day are
   * a run per tote, not one range, and a sweep from the binding's start would pass the chunks it
   * keeps again in every batch. A sweep that began here and reaches the binding's end goes on from
   * its start, so totes behind this point are read too (the cut-off moves between batches).
   */
  const resumeAt = new Map<string, number>()

  /** Up to HEADS_PER_READ of the binding's chunks that start before `cutoff`, from tote `fromTote` on (tote-ordered index). */
  const expiringChunks = (day: number, bindingKey: number | null, cutoff: number, fromTote: number): ChunkHead[] => {
    const t = chunkTable(day)
    const columns = `SELECT rowid, tote_key, first_ts, last_ts, n FROM ${t}`
    if (!partitions.get(day)!.byTote)
      return stmt(t, 'expiring', `${columns} WHERE binding_key IS ? AND first_ts < ? ORDER BY binding_key, first_ts LIMIT ?`).all(
        bindingKey,
        cutoff,
        HEADS_PER_READ,
      ) as ChunkHead[]
    return stmt(
      t,
      'expiring-from-tote',
      `${columns} WHERE binding_key IS ? AND tote_key >= ? AND first_ts < ? ORDER BY binding_key, tote_key, first_ts LIMIT ?`,
    ).all(bindingKey, fromTote, cutoff, HEADS_PER_READ) as ChunkHead[]
  }

  /** Deletes a chunk that ends before `cutoff`, or rewrites it without its readings before; how many went. */
  const removeChunkBefore = (t: string, c: ChunkHead, cutoff: number): number => {
    if (c.last_ts < cutoff) {
      stmt(t, 'delete', `DELETE FROM ${t} WHERE rowid = ?`).run(c.rowid)
      return c.n
    }
    const { data } = stmt(t, 'data', `SELECT data FROM ${t} WHERE rowid = ?`).get(c.rowid) as { data: Buffer }
    const kept = decodeChunk(c.first_ts, c.n, data).filter((r) => r.ts >= cutoff)
    stmt(t, 'rewrite', `UPDATE ${t} SET first_ts = ?, n = ?, data = ? WHERE rowid = ?`).run(
      kept[0]!.ts,
      kept.length,
      encodeChunk(kept),
      c.rowid,
    )
    return c.n - kept.length
  }

  /** Removes one binding's readings of the day before `cutoff`, up to about `budget`. */
  const removeBefore = (day: number, bindingKey: number | null, cutoff: number, budget: number): number => {
    const entry = partitions.get(day)!
    let removed = 0
    if (entry.chunks) {
      const t = chunkTable(day)
      const key = `${day}:${bindingKey}`
      const resume = resumeAt.get(key)
      resumeAt.delete(key)
      let from = resume ?? FIRST_TOTE
      let fromStart = resume === undefined
      for (;;) {
        const heads = expiringChunks(day, bindingKey, cutoff, from)
        for (const c of heads) {
          if (removed >= budget) break
          from = c.tote_key // what this batch took of that tote is gone: a read from it finds the rest
          removed += removeChunkBefore(t, c, cutoff)
        }
        if (removed >= budget) {
          if (entry.byTote) resumeAt.set(key, from)
          break
        }
        if (heads.length === HEADS_PER_READ) continue
        if (fromStart) break // the whole binding was read: nothing of it is left before the cut-off
        from = FIRST_TOTE
        fromStart = true
      }
    }
    if (entry.rows && removed < budget) {
      const t = rowTable(day)
      removed += stmt(
        t,
        'expire',
        `DELETE FROM ${t} WHERE (tote_key, ts) IN (SELECT tote_key, ts FROM ${t} WHERE binding_key IS ? AND ts < ? LIMIT ?)`,
      ).run(bindingKey, cutoff, budget - removed).changes
    }
    return removed
  }

  const isEmpty = (table: string) => stmt(table, 'any', `SELECT 1 FROM ${table} LIMIT 1`).get() === undefined

  /**
   * Whether the day holds a reading bound to one of `keys` (a JSON array): one seek of the chunks'
   * binding index a key; a past day's row table holds only the late readings the next compaction
   * packs, so its scan is short.
   */
  const holdsAny = (day: number, keys: string): boolean => {
    if (keys === '[]') return false
    const entry = partitions.get(day)!
    const holds = (t: string) =>
      stmt(t, 'has-binding', `SELECT 1 FROM ${t} WHERE binding_key IN (SELECT value FROM json_each(?)) LIMIT 1`).get(keys) !== undefined
    return (entry.chunks && holds(chunkTable(day))) || (entry.rows && holds(rowTable(day)))
  }

  /** One day's pass, in one transaction: what it removed, and whether it stopped for the budget. */
  const expireDay = db.transaction(
    (day: number, request: ExpiryRequest, keptKeys: () => KeptKeys, budget: number): { removed: number; full: boolean } => {
      const start = day * DAY_MS
      const end = start + DAY_MS
      if (end <= request.unboundBeforeMs && end <= request.boundBeforeMs && !holdsAny(day, keptKeys().json))
        return emptyDay(day, Math.min(budget, EMPTYING_ROWS))
      // Newer than the bound cut-off only unbound readings can go: one seek of the binding index, no scan.
      const bindings = start < request.boundBeforeMs ? bindingsOfDay(day) : [null]
      let removed = 0
      for (const b of bindings) {
        const cutoff = b === null ? request.unboundBeforeMs : keptKeys().keys.has(b) ? Number.NEGATIVE_INFINITY : request.boundBeforeMs
        if (cutoff <= start) continue
        removed += removeBefore(day, b, Math.min(cutoff, end), budget - removed)
        if (removed >= budget) return { removed, full: true }
      }
      if (partitions.get(day)?.rows && isEmpty(rowTable(day))) partitions.dropRows(day)
      if (partitions.get(day)?.chunks && isEmpty(chunkTable(day))) partitions.dropChunks(day)
      return { removed, full: false }
    },
  )

  /**
   * The binding keys of the deliveries whose readings stay whatever their age: read at most once a
   * batch, and only by a day that needs them (one wholly past both cut-offs, or one before the
   * records cut-off); days between the two cut-offs, the usual case, lose only unbound readings.
   */
  const keysOf = (deliveries: ReadonlySet<string>): (() => KeptKeys) => {
    let kept: KeptKeys | null = null
    return () => {
      if (kept) return kept
      const keys = keysOfDeliveries.all(JSON.stringify([...deliveries])).map(({ k }) => k)
      return (kept = { keys: new Set(keys), json: JSON.stringify(keys) })
    }
  }

  return {
    /** One batch of at most about `limit` readings (a day wholly past retention: at most EMPTYING_ROWS stored rows). */
    expire(request: ExpiryRequest, rolledBack: () => void): ExpiryResult {
      const horizon = Math.max(request.unboundBeforeMs, request.boundBeforeMs)
      const keptKeys = keysOf(request.keepDeliveries)
      let removed = 0
      for (const day of [...partitions.all()]) {
        if (day * DAY_MS >= horizon) break
        if (removed >= request.limit) return { removed, more: true }
        try {
          const pass = expireDay(day, request, keptKeys, request.limit - removed)
          removed += pass.removed
          if (pass.full) return { removed, more: true }
        } catch (err) {
          rolledBack()
          throw err
        }
      }
      resumeAt.clear() // a cursor only saves reads: none is needed past a pass (a stale one costs a wrap)
      return { removed, more: false }
    },
  }
}
