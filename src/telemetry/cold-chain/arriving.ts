// A publish still unstored after this long is taken as stuck (a store that never answers): it no
// longer keeps its tote from being judged silent. Real time, not the service clock.
const STUCK_MS = 30_000

/**
 * Totes with readings received but not yet judged (parsed, being stored, waiting for their group
 * to commit): such a tote is not quiet, so its silence is not judged until they arrive, or until
 * its last publish has been on its way for STUCK_MS.
 */
export class ArrivingReadings {
  private readonly totes = new Map<string, { count: number; lastAt: number }>()

  constructor(private readonly nowMs: () => number = () => performance.now()) {}

  add(toteId: string): void {
    const tote = this.totes.get(toteId)
    if (tote) {
      tote.count += 1
      tote.lastAt = this.nowMs()
    } else this.totes.set(toteId, { count: 1, lastAt: this.nowMs() })
  }

  remove(toteId: string): void {
    const tote = this.totes.get(toteId)
    if (tote && --tote.count === 0) this.totes.delete(toteId)
  }

  has(toteId: string): boolean {
    const tote = this.totes.get(toteId)
    return tote !== undefined && this.nowMs() - tote.lastAt < STUCK_MS
  }
}
