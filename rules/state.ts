// The per-delivery cold-chain state: a plain JSON object (numbers, strings, null, arrays), so it
// can be persisted as-is and restored with JSON.parse. The engine mutates it in place.
import type { BreakReason, ExcursionKind } from './events.js'
import { emptyMktSums, type MktSums } from './mkt.js'
import type { TemperatureProfile } from './profile.js'
import { startLedger, type StabilityLedger } from './stability-ledger.js'

/** A maximal run of time out of [min_c, max_c] (sensor-gap time included), still going on. */
export type OpenInterval = {
  /** Epoch ms. */
  start: number
  kind: ExcursionKind
  /** The reading farthest outside the range; null while the interval is only sensor-gap time. */
  peak_c: number | null
  unknown_ms: number
  /** temperature.excursion was emitted (the interval outlasted grace_s). */
  announced: boolean
}

/** An excursion (interval that outlasted grace_s) that has ended. */
export type ClosedExcursion = {
  start: number
  end: number
  kind: ExcursionKind
  peak_c: number | null
  unknown_ms: number
}

export type ColdChainState = {
  version: 1
  profile: string
  /** When the tote was bound to the delivery (dispatch occurred_at), epoch ms. */
  boundAt: number
  /** Event time of the last evaluated reading; readings at or before it are ignored. */
  lastTs: number | null
  lastTemp: number | null
  readings: number
  min_c: number | null
  max_c: number | null
  /** Time-weighted MKT sums over known (non-gap) time. */
  mkt: MktSums
  /** Cumulative time out of range, ms; includes grace time and sensor-gap time; never resets. */
  outMs: number
  /** Of which sensor-gap (unknown) time. */
  unknownMs: number
  open: OpenInterval | null
  excursions: ClosedExcursion[]
  /** Set once; never cleared. */
  broken: { reason: BreakReason; at: number } | null
  /** `offline_since` of the last sensor.offline emitted, so it is emitted once per gap. */
  offlineAnnouncedSince: number | null
  /** The items' stability budget ledger, charged reading by reading with the rules (only when the profile has a plan). */
  stability?: StabilityLedger
}

export function initialColdChain(profile: TemperatureProfile, boundAtMs: number): ColdChainState {
  const state: ColdChainState = {
    version: 1,
    profile: profile.name,
    boundAt: boundAtMs,
    lastTs: null,
    lastTemp: null,
    readings: 0,
    min_c: null,
    max_c: null,
    mkt: emptyMktSums(),
    outMs: 0,
    unknownMs: 0,
    open: null,
    excursions: [],
    broken: null,
    offlineAnnouncedSince: null,
  }
  if (profile.stability) state.stability = startLedger(profile.stability, profile.max_gap_s)
  return state
}
