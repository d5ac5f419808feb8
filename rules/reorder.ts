// Per-tote event-time reorder window (REORDER_WINDOW_S; rules/README.md, Semantics). Gateways buffer
// and batch, so readings arrive late and out of order; holding each reading until the tote has
// sent one at least windowMs newer (or has been silent for windowMs) lets the engine see them in
// ts order. If every reading arrives less than windowMs after its own ts, every arrival order
// releases the same sequence, so evaluation gives exactly the events of in-order arrival.

export type PushResult<R> = {
  /** Readings now released, in ts order (empty array shared when nothing is released). */
  released: readonly R[]
  /** ts is at or before the newest released reading: not buffered; evaluate it via recompute(). */
  late: boolean
  /** Same ts as a buffered reading or as the newest released one: dropped (readings are deduplicated on ts). */
  duplicate: boolean
}

const NOTHING: readonly never[] = Object.freeze([])

export class ReorderBuffer<R extends { ts: number }> {
  /** Held readings, ascending ts, no two with the same ts. */
  private readonly pending: R[] = []
  private newestTs = Number.NEGATIVE_INFINITY
  private releasedUpTo = Number.NEGATIVE_INFINITY
  private lastArrivalMs = Number.NEGATIVE_INFINITY

  /** @param windowMs how much newer (event time) or how long silent (wall clock) before release; 0 = release at once. */
  constructor(readonly windowMs: number) {
    if (!(windowMs >= 0) || !Number.isFinite(windowMs)) throw new RangeError('windowMs must be a finite number ≥ 0')
  }

  /**
   * Offers a reading that arrived at wall-clock `arrivalMs`. Only accepted readings (neither late
   * nor duplicate) restart the silence timer, so re-sent old readings cannot hold new ones back.
   */
  push(reading: R, arrivalMs: number): PushResult<R> {
    const ts = reading.ts
    if (ts <= this.releasedUpTo) return { released: NOTHING, late: true, duplicate: ts === this.releasedUpTo }
    if (!this.insert(reading)) return { released: NOTHING, late: false, duplicate: true }
    this.lastArrivalMs = arrivalMs
    if (ts > this.newestTs) this.newestTs = ts
    return { released: this.releaseUpTo(this.newestTs - this.windowMs), late: false, duplicate: false }
  }

  /** Releases everything held once no reading has been accepted for windowMs of wall clock. */
  flushSilent(nowMs: number): readonly R[] {
    if (this.pending.length === 0 || nowMs - this.lastArrivalMs < this.windowMs) return NOTHING
    return this.flushAll()
  }

  /** Releases everything held (end of binding, shutdown). */
  flushAll(): readonly R[] {
    return this.releaseUpTo(Number.POSITIVE_INFINITY)
  }

  /** Wall-clock time at which flushSilent would release, or null when nothing is held. */
  silentDeadline(): number | null {
    return this.pending.length === 0 ? null : this.lastArrivalMs + this.windowMs
  }

  /** The readings still held, ascending ts (a view: read it before the next push or release). */
  held(): readonly R[] {
    return this.pending
  }

  get size(): number {
    return this.pending.length
  }

  /** Inserts in ts order; false when that ts is already held. */
  private insert(reading: R): boolean {
    const p = this.pending
    const ts = reading.ts
    const n = p.length
    if (n === 0 || p[n - 1]!.ts < ts) {
      p.push(reading) // the usual case: in order
      return true
    }
    let lo = 0
    let hi = n
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (p[mid]!.ts < ts) lo = mid + 1
      else hi = mid
    }
    if (p[lo]!.ts === ts) return false
    p.splice(lo, 0, reading)
    return true
  }

  private releaseUpTo(cutoffTs: number): readonly R[] {
    const p = this.pending
    let k = 0
    while (k < p.length && p[k]!.ts <= cutoffTs) k++
    if (k === 0) return NOTHING
    const released = p.splice(0, k)
    this.releasedUpTo = released[k - 1]!.ts
    return released
  }
}
