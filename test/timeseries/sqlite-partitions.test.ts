import Database from 'better-sqlite3'
import { describe, expect, it } from 'vitest'
import { chunkTable, openPartitions } from '../../src/timeseries/sqlite-partitions.js'
import { withTimeOrderedBindingIndex } from '../helpers/old-chunk-index.js'

/** Which of a chunk table's indexes SQLite would pick to find one binding's chunks from a tote on. */
const planFor = (db: Database.Database, day: number) =>
  db
    .prepare(
      `EXPLAIN QUERY PLAN SELECT rowid, last_ts, n FROM ${chunkTable(day)} WHERE binding_key IS ? AND tote_key >= ? AND first_ts < ? ORDER BY binding_key, tote_key, first_ts`,
    )
    .all(1, 0, 0)
    .map((row) => (row as { detail: string }).detail)
    .join(' | ')

describe('day partitions: the chunk tables’ binding index', () => {
  it('orders a new chunk table’s binding index by tote, for days before 1970 too, and says so again after a reopen', () => {
    const db = new Database(':memory:')
    const partitions = openPartitions(db)
    for (const day of [20_000, -3]) {
      partitions.ensureChunks(day)
      expect(partitions.get(day)?.byTote).toBe(true)
      // The expiry's read from a tote on is a seek of that index, with no sort.
      expect(planFor(db, day)).toMatch(/USING INDEX \w+_by_binding_tote \(binding_key=\? AND tote_key>\?\)/)
      expect(planFor(db, day)).not.toMatch(/TEMP B-TREE/)
    }
    expect(openPartitions(db).get(-3)).toEqual({ rows: false, chunks: true, byTote: true })
  })

  it('knows a chunk table made before that index by its old one, and forgets it when the table is dropped', () => {
    const db = new Database(':memory:')
    openPartitions(db).ensureChunks(20_001)
    withTimeOrderedBindingIndex(db)
    const partitions = openPartitions(db)
    expect(partitions.get(20_001)).toEqual({ rows: false, chunks: true, byTote: false })
    partitions.reload()
    expect(partitions.get(20_001)?.byTote).toBe(false)
    partitions.ensureRows(20_001)
    partitions.dropChunks(20_001)
    expect(partitions.get(20_001)).toEqual({ rows: true, chunks: false, byTote: false })
    partitions.ensureChunks(20_001) // made again: with the new index
    expect(partitions.get(20_001)?.byTote).toBe(true)
  })
})
