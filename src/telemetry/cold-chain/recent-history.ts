import { evaluate, reconcile, type ColdChainState, type Reading, type RuleEvent, type TemperatureProfile } from '../../../rules/index.js'

/** A snapshot of the rule state every this many readings evaluated. */
const SNAPSHOT_EVERY = 64
/** Snapshots kept: late readings up to about SNAPSHOT_EVERY × this many readings back are judged from memory. */
const SNAPSHOTS_KEPT = 8

/**
 * A delivery's recent readings and snapshots of its rule state along them, so that a reading that
 * comes a little late is judged by replaying from the last snapshot before it, in memory, instead
 * of reading the delivery's whole history from the store. Readings come late all the time when
 * several copies share a tote's readings: those another copy stored reach the evaluating copy
 * over PostgreSQL NOTIFY after the ones it stored itself.
 *
 * Every snapshot holds exactly the readings up to its lastTs, and the kept readings are every
 * reading evaluated after the oldest snapshot, so a replay from a snapshot over the kept readings
 * is the replay of the whole history (rules/engine.ts is a fold). Memory: at most
 * SNAPSHOTS_KEPT + 1 states and SNAPSHOT_EVERY × (SNAPSHOTS_KEPT + 1) readings per delivery.
 */
export class RecentHistory {
  private snapshots: ColdChainState[]
  /** Readings after the oldest snapshot, ascending ts, one per ts (in two arrays: no object per reading). */
  private readonly ts: number[] = []
  private readonly temps: number[] = []
  private sinceSnapshot = 0

  constructor(start: ColdChainState) {
    this.snapshots = [structuredClone(start)]
  }

  /** The state was rebuilt from the store: the history starts again from it. */
  reset(state: ColdChainState): void {
    this.snapshots = [structuredClone(state)]
    this.ts.length = 0
    this.temps.length = 0
    this.sinceSnapshot = 0
  }

  /**
   * Readings just given to evaluate() (ascending ts) and the state it left: those it took (after the
   * previous lastTs, finite) are kept, and every SNAPSHOT_EVERY a snapshot of the state is taken.
   */
  evaluated(readings: readonly Reading[], state: ColdChainState): void {
    for (const r of readings) {
      const last = this.ts.length ? this.ts[this.ts.length - 1]! : this.snapshots[this.snapshots.length - 1]!.lastTs
      if (!Number.isFinite(r.ts) || !Number.isFinite(r.temp_c) || (last !== null && r.ts <= last)) continue
      this.ts.push(r.ts)
      this.temps.push(r.temp_c)
      this.sinceSnapshot++
    }
    if (this.sinceSnapshot < SNAPSHOT_EVERY) return
    this.snapshots.push(structuredClone(state))
    this.sinceSnapshot = 0
    this.trim()
  }

  /** Drops the oldest snapshots beyond SNAPSHOTS_KEPT + 1, and the readings before the oldest left. */
  private trim(): void {
    if (this.snapshots.length <= SNAPSHOTS_KEPT + 1) return
    this.snapshots.splice(0, this.snapshots.length - SNAPSHOTS_KEPT - 1)
    const keepFrom = this.firstAfter(this.snapshots[0]!.lastTs)
    this.ts.splice(0, keepFrom)
    this.temps.splice(0, keepFrom)
  }

  /** Whether a late reading this old can be judged from memory (it is newer than the oldest snapshot). */
  covers(ts: number): boolean {
    const oldest = this.snapshots[0]!.lastTs
    return oldest === null || ts > oldest
  }

  /**
   * Judges late readings (all covered; those after live.lastTs are not late and are ignored) with
   * what is kept: replays from the last snapshot before the oldest of them, taking snapshots anew
   * along the way (those after it no longer hold every reading before them), and reconciles with
   * the live state as a recompute from the store does (rules/late.ts). Returns the state to
   * continue with; `events` gets what the late readings reveal. Readings kept already (same ts)
   * change nothing.
   */
  judgeLate(late: readonly Reading[], live: ColdChainState, profile: TemperatureProfile, events: RuleEvent[]): ColdChainState {
    const upTo = live.lastTs
    let oldest = Number.POSITIVE_INFINITY
    for (const r of late) {
      if (upTo === null || !(r.ts <= upTo) || !Number.isFinite(r.temp_c)) continue // not late: nothing to replay it into
      if (this.insert(r) && r.ts < oldest) oldest = r.ts
    }
    if (oldest === Number.POSITIVE_INFINITY) return live
    let s = this.snapshots.length - 1
    while (s > 0 && this.snapshots[s]!.lastTs! >= oldest) s--
    this.snapshots.length = s + 1
    const state = structuredClone(this.snapshots[s]!)
    const replayed: RuleEvent[] = []
    const chunk: Reading[] = []
    for (let i = this.firstAfter(state.lastTs); i < this.ts.length; i++) {
      chunk.push({ ts: this.ts[i]!, temp_c: this.temps[i]! })
      if (chunk.length < SNAPSHOT_EVERY) continue
      evaluate(state, profile, chunk, replayed)
      this.snapshots.push(structuredClone(state))
      chunk.length = 0
    }
    evaluate(state, profile, chunk, replayed)
    this.sinceSnapshot = chunk.length
    this.trim()
    return reconcile(live, state, replayed, events).state
  }

  /** Every kept reading (for a recompute from the store: those judged while it read). */
  kept(): Reading[] {
    return this.ts.map((ts, i) => ({ ts, temp_c: this.temps[i]! }))
  }

  /** Inserts in ts order; false for a duplicate: a reading whose ts is kept already (the first one stored stands). */
  private insert(r: Reading): boolean {
    const i = this.firstAfter(r.ts)
    if (i > 0 && this.ts[i - 1] === r.ts) return false
    this.ts.splice(i, 0, r.ts)
    this.temps.splice(i, 0, r.temp_c)
    return true
  }

  /** Index of the first kept reading with ts > `after` (all of them when null). */
  private firstAfter(after: number | null): number {
    if (after === null) return 0
    let lo = 0
    let hi = this.ts.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.ts[mid]! <= after) lo = mid + 1
      else hi = mid
    }
    return lo
  }
}
