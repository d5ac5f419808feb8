import Database from 'better-sqlite3'
import { createCompaction } from './sqlite-compaction.js'
import { chunkTable, DAY_MS, openPartitions, rowTable } from './sqlite-partitions.js'

/**
 * A readings file opened read-only, while the service may be writing it: what benchmarks and
 * crash tests check after the fact (how many readings are stored, which of a tote's). Reads
 * every day partition, rows and chunks alike.
 */
export function openReadingsReadOnly(path: string) {
  const db = new Database(path, { readonly: true, fileMustExist: true })
  const partitions = openPartitions(db)
  const compaction = createCompaction(db, partitions)
  return {
    count(): number {
      let n = 0
      for (const day of partitions.all()) {
        const entry = partitions.get(day)!
        if (entry.rows) n += db.prepare<[], { n: number }>(`SELECT count(*) AS n FROM ${rowTable(day)}`).get()!.n
        if (entry.chunks) n += db.prepare<[], { n: number }>(`SELECT coalesce(sum(n), 0) AS n FROM ${chunkTable(day)}`).get()!.n
      }
      return n
    },
    /** The ts of every stored reading of the tote. */
    timestampsOf(toteId: string): number[] {
      const key = db.prepare<[string], { k: number }>('SELECT tote_key AS k FROM totes WHERE tote_id = ?').get(toteId)?.k
      if (key === undefined) return []
      const found: number[] = []
      for (const day of partitions.all()) {
        const entry = partitions.get(day)!
        if (entry.rows)
          found.push(
            ...db
              .prepare<[number], { ts: number }>(`SELECT ts FROM ${rowTable(day)} WHERE tote_key = ?`)
              .all(key)
              .map((r) => r.ts),
          )
        if (entry.chunks) found.push(...compaction.readTimesAndTemperatures(day, key, day * DAY_MS, (day + 1) * DAY_MS).ts)
      }
      return found
    },
    close: () => db.close(),
  }
}
