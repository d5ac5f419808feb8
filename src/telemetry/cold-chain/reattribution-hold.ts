import type { ReadingRow } from '../../timeseries/sink.js'

/**
 * Totes whose binding change is being applied to their stored readings (ColdChainMonitor.hold):
 * their committed readings wait here, in commit order, until every hold is released.
 */
export class ReattributionHold {
  private readonly held = new Map<string, { holds: number; rows: ReadingRow[] }>()

  hold(toteId: string): void {
    const held = this.held.get(toteId)
    if (held) held.holds += 1
    else this.held.set(toteId, { holds: 1, rows: [] })
  }

  /** Ends one hold; with the last, the rows that waited (null while other holds remain, or none was taken). */
  release(toteId: string): ReadingRow[] | null {
    const held = this.held.get(toteId)
    if (!held || --held.holds > 0) return null
    this.held.delete(toteId)
    return held.rows
  }

  isHeld(toteId: string): boolean {
    return this.held.has(toteId)
  }

  /** Keeps the row if its tote is held; false when it may be judged now. */
  keep(row: ReadingRow): boolean {
    if (this.held.size === 0) return false // the usual case: one check per row on the hot path
    const held = this.held.get(row.tote_id)
    if (!held) return false
    held.rows.push(row)
    return true
  }
}
