/**
 * Totes with readings received but not yet judged (parsed, being stored, waiting for their group
 * to commit): such a tote is not quiet, so its silence is not judged until they arrive.
 */
export class ArrivingReadings {
  private readonly counts = new Map<string, number>()

  add(toteId: string): void {
    this.counts.set(toteId, (this.counts.get(toteId) ?? 0) + 1)
  }

  remove(toteId: string): void {
    const count = this.counts.get(toteId)
    if (count === undefined) return
    if (count > 1) this.counts.set(toteId, count - 1)
    else this.counts.delete(toteId)
  }

  has(toteId: string): boolean {
    return this.counts.has(toteId)
  }
}
