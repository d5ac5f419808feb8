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
 * is the replay of the whole history (rules/engine.ts is a fold) but for what the live state alone
 * knows (a break checkSilence raised or a load found announced, the last sensor.offline), which
 * reconcile() takes from the live state. Memory: SNAPSHOTS_KEPT + 1 states and the readings since
 * the oldest, SNAPSHOT_EVERY × (SNAPSHOTS_KEPT + 1) of them when readings come a few at a time.
 */
export class RecentHistory {
  private snapshots: ColdChainState[]
  /** Readings after the oldest snapshot, ascending ts, one per ts (in two arrays: no object per reading). */
  private readonly ts: number[] = []
  private readonly temps: number[] = []
  private sinceSnapshot = 0
  /** While a recompute reads the store: every reading this history is told of (recording()). */
  private recorded: Reading[] | null = null

  private constructor(start: ColdChainState) {
    this.snapshots = [structuredClone(start)]
  }

  /**
   * Replays `readings` (ascending ts, after start.lastTs) from `start` (mutated), keeping the
   * last of them and snapshots along them: a delivery loaded or recomputed from the store can
   * judge its next late readings from memory. Returns the replayed state, its events and the history.
   */
  static replay(
    start: ColdChainState,
    profile: TemperatureProfile,
    readings: readonly Reading[],
  ): { state: ColdChainState; events: RuleEvent[]; history: RecentHistory } {
    const events: RuleEvent[] = []
    // Only the readings that can end up kept need a snapshot before them; the rest is one fold.
    const first = Math.max(0, readings.length - SNAPSHOT_EVERY * (SNAPSHOTS_KEPT + 1))
    evaluate(start, profile, first === 0 ? [] : readings.slice(0, first), events)
    const history = new RecentHistory(start)
    let last = start.lastTs
    for (let i = first; i < readings.length; i++) {
      const r = readings[i]!
      if (!Number.isFinite(r.ts) || !Number.isFinite(r.temp_c) || (last !== null && r.ts <= last)) continue // as evaluate() skips them
      history.keep(r)
      last = r.ts
    }
    const state = history.rebuildFrom(0, profile, events)
    return { state, events, history }
  }

  /**
   * Readings just given to evaluate() (ascending ts) and the state it left: those it took (after the
   * previous lastTs, finite) are kept, and every SNAPSHOT_EVERY a snapshot of the state is taken.
   */
  evaluated(readings: readonly Reading[], state: ColdChainState): void {
    for (const r of readings) {
      const last = this.ts.length ? this.ts[this.ts.length - 1]! : this.snapshots[this.snapshots.length - 1]!.lastTs
      if (!Number.isFinite(r.ts) || !Number.isFinite(r.temp_c) || (last !== null && r.ts <= last)) continue
      this.keep(r)
      this.sinceSnapshot++
    }
    if (this.sinceSnapshot < SNAPSHOT_EVERY) return
    this.snapshots.push(structuredClone(state))
    this.sinceSnapshot = 0
    this.trim()
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
    const replayed: RuleEvent[] = []
    const state = this.rebuildFrom(s, profile, replayed)
    return reconcile(live, state, replayed, events).state
  }

  /**
   * Records every reading this history is told of from now on, until the returned function is
   * called, which returns them: a recompute adds those judged while it read the store (its answer
   * may lack them). Kept apart from the kept readings, which are trimmed.
   */
  recording(): () => Reading[] {
    const recorded: Reading[] = []
    this.recorded = recorded
    return () => {
      if (this.recorded === recorded) this.recorded = null
      return recorded
    }
  }

  /**
   * Replays the kept readings after snapshot `s` from a copy of it, snapshotting every
   * SNAPSHOT_EVERY (the snapshots after `s` are replaced); returns the state reached.
   */
  private rebuildFrom(s: number, profile: TemperatureProfile, events: RuleEvent[]): ColdChainState {
    this.snapshots.length = s + 1
    const state = structuredClone(this.snapshots[s]!)
    let i = this.firstAfter(state.lastTs)
    while (i < this.ts.length) {
      const n = Math.min(SNAPSHOT_EVERY, this.ts.length - i)
      evaluate(state, profile, this.chunk(i, n), events)
      i += n
      if (n === SNAPSHOT_EVERY) this.snapshots.push(structuredClone(state))
    }
    this.trim()
    this.sinceSnapshot = this.ts.length - this.firstAfter(this.snapshots[this.snapshots.length - 1]!.lastTs)
    return state
  }

  /** Kept readings i … i + n − 1 as Reading objects, reused from one pool (evaluate() keeps no reference). */
  private chunk(i: number, n: number): readonly Reading[] {
    CHUNK.length = 0
    for (let k = 0; k < n; k++) {
      const r = POOL[k]!
      r.ts = this.ts[i + k]!
      r.temp_c = this.temps[i + k]!
      CHUNK.push(r)
    }
    return CHUNK
  }

  /** Drops the oldest snapshots beyond SNAPSHOTS_KEPT + 1, and the readings before the oldest left. */
  private trim(): void {
    if (this.snapshots.length <= SNAPSHOTS_KEPT + 1) return
    this.snapshots.splice(0, this.snapshots.length - SNAPSHOTS_KEPT - 1)
    const keepFrom = this.firstAfter(this.snapshots[0]!.lastTs)
    this.ts.splice(0, keepFrom)
    this.temps.splice(0, keepFrom)
  }

  private keep(r: Reading): void {
    this.ts.push(r.ts)
    this.temps.push(r.temp_c)
    this.recorded?.push({ ts: r.ts, temp_c: r.temp_c })
  }

  /** Inserts in ts order; false for a duplicate: a reading whose ts is kept already (the first one stored stands). */
  private insert(r: Reading): boolean {
    const i = this.firstAfter(r.ts)
    if (i > 0 && this.ts[i - 1] === r.ts) return false
    this.ts.splice(i, 0, r.ts)
    this.temps.splice(i, 0, r.temp_c)
    this.recorded?.push({ ts: r.ts, temp_c: r.temp_c })
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

const POOL: Reading[] = Array.from({ length: SNAPSHOT_EVERY }, () => ({ ts: 0, temp_c: 0 }))
const CHUNK: Reading[] = []
