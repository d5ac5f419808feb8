// When a cold chain breaks (rules/README.md, Semantics), shared by evaluate() and checkSilence() so both compute
// the same instant, reason and data.
import {
  eventKey,
  rfc3339,
  roundCelsius,
  type BreakReason,
  type BreakThreshold,
  type ColdChainBreakData,
  type ExhaustedItem,
  type RuleEvent,
} from './events.js'
import { mktOf, type MktSums } from './mkt.js'
import type { TemperatureProfile } from './profile.js'
import type { ColdChainState } from './state.js'

/**
 * MKT is judged only once readings cover this much time. USP <1079.2> means MKT as a long-horizon
 * average (storage periods of weeks); over the first minutes of a delivery it is just the current
 * temperature, and judging it then would turn every permitted early excursion (e.g. 28 °C for a
 * controlled-room product) into a break. Until then grace, max_excursion_s, the budget and the
 * hard limits protect the product.
 */
export const MKT_MIN_COVERAGE_S = 3600

/**
 * When, within [from, to), the open interval outlasts max_excursion_s or the cumulative budget
 * runs out, whichever is first; null if neither. "Longer than" is strict: exactly at the limit
 * is still allowed.
 */
export function breakCrossing(
  profile: TemperatureProfile,
  intervalStart: number,
  outMsAtFrom: number,
  from: number,
  to: number,
): { at: number; threshold: 'max_excursion_s' | 'max_cumulative_s' } | null {
  if (profile.stability?.auto === true) return null // released by budget: the ledger judges time out of range (and gaps)
  const tooLongAt = intervalStart + profile.max_excursion_s * 1000
  const budgetMs = profile.max_cumulative_s * 1000
  const budgetAt = from + (budgetMs - outMsAtFrom)
  const tooLong = to > tooLongAt
  const overBudget = outMsAtFrom + (to - from) > budgetMs
  if (tooLong && (!overBudget || tooLongAt <= budgetAt)) return { at: Math.max(from, tooLongAt), threshold: 'max_excursion_s' }
  if (overBudget) return { at: Math.max(from, budgetAt), threshold: 'max_cumulative_s' }
  return null
}

/** MKT is over the profile's limit. Judged on the value rounded as it is shown (0.01 °C). */
export function mktExceeded(profile: TemperatureProfile, sums: MktSums): boolean {
  if (profile.stability?.auto === true) return false // released by budget: the products' own data replace MKT
  if (profile.mkt_max_c === null || sums.weight_s < MKT_MIN_COVERAGE_S) return false
  return roundCelsius(mktOf(sums)!) > profile.mkt_max_c
}

export type BreakContext = {
  temp_c: number | null
  /** Cumulative out-of-range and unknown time at the break instant. */
  outMs: number
  unknownMs: number
  intervalStart: number | null
  /** MKT sums as of the break (evaluated readings, or a projection of them). */
  mkt: MktSums
  /** `stability_exhausted`: the item whose budget ran out. */
  item?: ExhaustedItem
}

/** Marks the delivery broken and emits cold-chain.break; callers check state.broken first. */
export function breakColdChain(
  state: ColdChainState,
  profile: TemperatureProfile,
  events: RuleEvent[],
  reason: BreakReason,
  threshold: BreakThreshold,
  at: number,
  ctx: BreakContext,
): void {
  state.broken = { reason, at }
  const mkt = mktOf(ctx.mkt)
  const data: ColdChainBreakData = {
    reason,
    threshold,
    // A stability break's limit is the exhausted band's allowance (0 for the other reasons: data.item says which).
    limit: threshold === 'stability' ? (ctx.item?.band?.allowed_s ?? 0) : profile[threshold]!,
    broken_at: rfc3339(at),
    temp_c: ctx.temp_c,
    excursion_started_at: ctx.intervalStart === null ? null : rfc3339(ctx.intervalStart),
    excursion_duration_s: ctx.intervalStart === null ? null : (at - ctx.intervalStart) / 1000,
    time_out_of_range_s: ctx.outMs / 1000,
    unknown_s: ctx.unknownMs / 1000,
    mkt_c: mkt === null ? null : roundCelsius(mkt),
    profile: profile.name,
    ...(ctx.item ? { item: ctx.item } : {}),
  }
  events.push({ type: 'cold-chain.break', key: eventKey.break, at, data })
}
