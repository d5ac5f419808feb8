import type Database from 'better-sqlite3'
import type { ExpiryRequest, ExpiryResult } from './sink.js'
import { decodeChunk, encodeChunk } from './sqlite-chunk.js'
import { chunkTable, DAY_MS, rowTable, type Partitions } from './sqlite-partitions.js'

/**
 * Expiry on the SQLite readings file (ExpiryRequest, sink.ts), day by day, oldest first, one
 * transaction per day and pass:
 *
 * - A day that ended before both cut-offs and holds no reading of a kept delivery is dropped
 *   whole (its row and chunk tables: DROP TABLE, whatever the number of readings).
 * - Otherwise, for each binding in the day (found through the chunk table's binding index, or a
 *   scan of a row table not compacted yet) whose readings may go — none (unbound) before
 *   `unboundBeforeMs`; a delivery's not in `keepDeliveries` before `boundBeforeMs` — its chunks
 *   wholly before the cut-off are deleted, a chunk across the cut-off is rewritten without its
 *   older readings, and its rows before the cut-off are deleted; at most about `limit` readings.
 * - The binding is the one each reading has when the pass runs: attribute() re-binds stored
 *   readings (chunks included) in the same kind of transaction, so a pass never sees half of it.
 */

type ChunkHead = { rowid: number; tote_key: number; first_ts: number; last_ts: number; n: number }

export function createExpiry(db: Database.Database, partitions: Partitions) {
  const deliveryOf = db.prepare<[number], { delivery_id: string | null }>('SELECT delivery_id FROM bindings WHERE binding_key = ?')
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

  const countOfDay = (day: number): number => {
    const entry = partitions.get(day)!
    let n = 0
    if (entry.rows) n += (stmt(rowTable(day), 'count', `SELECT count(*) AS n FROM ${rowTable(day)}`).get() as { n: number }).n
    if (entry.chunks)
      n += (stmt(chunkTable(day), 'count', `SELECT coalesce(sum(n), 0) AS n FROM ${chunkTable(day)}`).get() as { n: number }).n
    return n
  }

  /** Removes one binding's readings of the day before `cutoff`, up to about `budget`. */
  const removeBefore = (day: number, bindingKey: number | null, cutoff: number, budget: number): number => {
    const entry = partitions.get(day)!
    let removed = 0
    if (entry.chunks) {
      const t = chunkTable(day)
      const heads = stmt(
        t,
        'expiring',
        `SELECT rowid, tote_key, first_ts, last_ts, n FROM ${t} WHERE binding_key IS ? AND first_ts < ? ORDER BY binding_key, first_ts LIMIT ?`,
      ).all(bindingKey, cutoff, budget) as ChunkHead[]
      for (const c of heads) {
        if (removed >= budget) break
        if (c.last_ts < cutoff) {
          stmt(t, 'delete', `DELETE FROM ${t} WHERE rowid = ?`).run(c.rowid)
          removed += c.n
          continue
        }
        const { data } = stmt(t, 'data', `SELECT data FROM ${t} WHERE rowid = ?`).get(c.rowid) as { data: Buffer }
        const kept = decodeChunk(c.first_ts, c.n, data).filter((r) => r.ts >= cutoff)
        stmt(t, 'rewrite', `UPDATE ${t} SET first_ts = ?, n = ?, data = ? WHERE rowid = ?`).run(
          kept[0]!.ts,
          kept.length,
          encodeChunk(kept),
          c.rowid,
        )
        removed += c.n - kept.length
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

  /** One day's pass, in one transaction: what it removed, and whether it stopped for the budget. */
  const expireDay = db.transaction((day: number, request: ExpiryRequest, budget: number): { removed: number; full: boolean } => {
    const start = day * DAY_MS
    const end = start + DAY_MS
    const deliveries = new Map<number, string | null>()
    const kept = (b: number) => {
      if (!deliveries.has(b)) deliveries.set(b, deliveryOf.get(b)?.delivery_id ?? null)
      const d = deliveries.get(b)!
      return d !== null && request.keepDeliveries.has(d)
    }
    // Newer than the bound cut-off only unbound readings can go: one seek of the binding index, no scan.
    const bindings = start < request.boundBeforeMs ? bindingsOfDay(day) : [null]
    if (end <= request.unboundBeforeMs && end <= request.boundBeforeMs && !bindings.some((b) => b !== null && kept(b))) {
      const removed = countOfDay(day)
      partitions.dropRows(day)
      partitions.dropChunks(day)
      return { removed, full: false }
    }
    let removed = 0
    for (const b of bindings) {
      const cutoff = b === null ? request.unboundBeforeMs : kept(b) ? Number.NEGATIVE_INFINITY : request.boundBeforeMs
      if (cutoff <= start) continue
      removed += removeBefore(day, b, Math.min(cutoff, end), budget - removed)
      if (removed >= budget) return { removed, full: true }
    }
    if (partitions.get(day)?.rows && isEmpty(rowTable(day))) partitions.dropRows(day)
    if (partitions.get(day)?.chunks && isEmpty(chunkTable(day))) partitions.dropChunks(day)
    return { removed, full: false }
  })

  return {
    /** One batch of at most about `limit` readings (a whole day dropped counts as its readings). */
    expire(request: ExpiryRequest, rolledBack: () => void): ExpiryResult {
      const horizon = Math.max(request.unboundBeforeMs, request.boundBeforeMs)
      let removed = 0
      for (const day of [...partitions.all()]) {
        if (day * DAY_MS >= horizon) break
        if (removed >= request.limit) return { removed, more: true }
        try {
          const pass = expireDay(day, request, request.limit - removed)
          removed += pass.removed
          if (pass.full) return { removed, more: true }
        } catch (err) {
          rolledBack()
          throw err
        }
      }
      return { removed, more: false }
    },
  }
}
