// The events the rule engine emits (rules/README.md). Every member is JSON; times in `data` are RFC 3339
// strings with Z (docs/api.md, Conventions), `at` is the event time in epoch ms. `key` is deterministic, so the
// outbox can de-duplicate an event that is produced twice (replay, restart, silence then reading).

export const excursionKinds = ['high', 'low', 'unknown'] as const
export type ExcursionKind = (typeof excursionKinds)[number]

export const breakReasons = [
  'hard_limit',
  'excursion_too_long',
  'cumulative_budget',
  'mkt_exceeded',
  'sensor_gap',
  'stability_exhausted',
] as const
export type BreakReason = (typeof breakReasons)[number]

/**
 * The profile member whose limit was crossed. For `sensor_gap` it is max_excursion_s or max_cumulative_s;
 * for `stability_exhausted`, `stability` (the item's product stability data: `data.item` says what ran out).
 */
export type BreakThreshold = 'hard_min_c' | 'hard_max_c' | 'max_excursion_s' | 'max_cumulative_s' | 'mkt_max_c' | 'stability'

/** Why an item's stability budget is exhausted (rules/README.md, Stability budgets). */
export const exhaustedReasons = ['band_budget', 'outside_bands', 'freeze_thaw', 'hard_limit'] as const
export type ExhaustedReason = (typeof exhaustedReasons)[number]

export type StabilityBand = { min_c: number; max_c: number; allowed_s: number }

/** The item of a delivery whose budget ran out, in a `stability_exhausted` break. */
export type ExhaustedItem = {
  /** Position among the prescription's items that name a product. */
  item: number
  ndc: string
  product_id: string
  version: number
  reason: ExhaustedReason
  /** The band whose budget ran out (band_budget); null for the other reasons. */
  band: StabilityBand | null
  exhausted_at: string
  /** The temperature it was charged at or read; null when it ran out in unknown (sensor-gap) time. */
  temp_c: number | null
}

export type BudgetLowEventData = {
  item: number
  ndc: string
  product_id: string
  version: number
  band: StabilityBand
  /** What was left at that instant: a fifth of the band's budget. */
  remaining_s: number
}

export type ExcursionEventData = {
  excursion_started_at: string
  /** high/low: the side of the farthest reading so far; unknown: only sensor-gap time so far. */
  kind: ExcursionKind
  /** The reading farthest outside the range so far; null when only unknown time. */
  peak_c: number | null
  min_c: number
  max_c: number
  grace_s: number
}

export type RecoveredEventData = {
  excursion_started_at: string
  recovered_at: string
  duration_s: number
  kind: ExcursionKind
  peak_c: number | null
  /** The in-range reading that ended the excursion. */
  temp_c: number
  /** Part of duration_s that was sensor-gap time. */
  unknown_s: number
}

export type SensorOfflineEventData = {
  /** Null when the tote never sent a reading since it was bound. */
  last_reading_at: string | null
  /** last reading (or binding) + max_gap_s: from here on the temperature is unknown. */
  offline_since: string
  /** The reading that ended the gap; null when raised by the wall-clock silence check. */
  back_online_at: string | null
  max_gap_s: number
}

export type ColdChainBreakData = {
  reason: BreakReason
  threshold: BreakThreshold
  /** The profile's value for `threshold`. */
  limit: number
  broken_at: string
  /** hard_limit: the reading; otherwise the last known reading, null inside a sensor gap. */
  temp_c: number | null
  /** The out-of-range interval the break happened in, if any. */
  excursion_started_at: string | null
  excursion_duration_s: number | null
  /** Cumulative out-of-range time at the break, sensor gaps included. */
  time_out_of_range_s: number
  /** Of which sensor-gap time. */
  unknown_s: number
  /** MKT of the readings evaluated so far, rounded to 0.01 °C. */
  mkt_c: number | null
  profile: string
  /** `stability_exhausted` only: the item that ran out. */
  item?: ExhaustedItem
}

type Event<T extends string, D> = { type: T; key: string; at: number; data: D }

export type ExcursionEvent = Event<'temperature.excursion', ExcursionEventData>
export type RecoveredEvent = Event<'temperature.recovered', RecoveredEventData>
export type ColdChainBreakEvent = Event<'cold-chain.break', ColdChainBreakData>
export type SensorOfflineEvent = Event<'sensor.offline', SensorOfflineEventData>

export type BudgetLowEvent = Event<'stability.budget-low', BudgetLowEventData>

export type RuleEvent = ExcursionEvent | RecoveredEvent | ColdChainBreakEvent | SensorOfflineEvent | BudgetLowEvent

export const eventKey = {
  excursion: (startMs: number) => `excursion:${startMs}`,
  recovered: (startMs: number) => `recovered:${startMs}`,
  offline: (sinceMs: number) => `offline:${sinceMs}`,
  /** Once per delivery. */
  break: 'break',
} as const

export function rfc3339(ms: number): string {
  return new Date(ms).toISOString()
}

/** 0.01 °C: far below sensor accuracy, and what pharmacists see is what the rules judged. */
export function roundCelsius(c: number): number {
  return Math.round(c * 100) / 100
}
