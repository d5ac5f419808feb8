// The cold-chain part of a delivery as the API shows it (the delivery's `cold_chain` block and the trace summary).
import { rfc3339, roundCelsius, type BreakReason, type ExcursionKind } from './events.js'
import { mktOf } from './mkt.js'
import type { ColdChainState } from './state.js'

export type ExcursionSummary = {
  started_at: string
  /** Null while the excursion is going on. */
  ended_at: string | null
  /** Up to ended_at, or up to the last evaluated reading while open. */
  duration_s: number
  /** The reading farthest outside the range; null when the excursion was only sensor-gap time. */
  peak_c: number | null
  kind: ExcursionKind
}

export type ColdChainSummary = {
  /** BROKEN once broken (for good); EXCURSION while an announced excursion is open; else OK. */
  state: 'OK' | 'EXCURSION' | 'BROKEN'
  min_c: number | null
  max_c: number | null
  /** USP <1079.2> MKT over known time, 0.01 °C; the single reading before any time is covered; null without readings. */
  mkt_c: number | null
  /** Cumulative out-of-range time, grace and sensor gaps included, up to the last evaluated reading. */
  time_out_of_range_s: number
  /** Of which sensor-gap (unknown) time. */
  unknown_s: number
  /** Intervals that outlasted grace_s, oldest first. */
  excursions: ExcursionSummary[]
  break: { reason: BreakReason; at: string } | null
}

export function summarize(state: ColdChainState): ColdChainSummary {
  const excursions: ExcursionSummary[] = state.excursions.map((e) => ({
    started_at: rfc3339(e.start),
    ended_at: rfc3339(e.end),
    duration_s: (e.end - e.start) / 1000,
    peak_c: e.peak_c,
    kind: e.kind,
  }))
  const open = state.open
  if (open !== null && open.announced) {
    excursions.push({
      started_at: rfc3339(open.start),
      ended_at: null,
      duration_s: (Math.max(state.lastTs ?? open.start, open.start) - open.start) / 1000,
      peak_c: open.peak_c,
      kind: open.kind,
    })
  }
  const mkt = mktOf(state.mkt) ?? state.lastTemp
  return {
    state: state.broken !== null ? 'BROKEN' : open?.announced ? 'EXCURSION' : 'OK',
    min_c: state.min_c,
    max_c: state.max_c,
    mkt_c: mkt === null ? null : roundCelsius(mkt),
    time_out_of_range_s: state.outMs / 1000,
    unknown_s: state.unknownMs / 1000,
    excursions,
    break: state.broken === null ? null : { reason: state.broken.reason, at: rfc3339(state.broken.at) },
  }
}
