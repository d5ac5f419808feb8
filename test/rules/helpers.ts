// Shared vocabulary for the rule tests: minutes since a fixed binding time.
import { resolveProfile, type Reading } from '../../rules/index.js'

/** Binding time of every test delivery: Monday 2025-01-06 09:00:00Z. */
export const BOUND_AT = Date.UTC(2025, 0, 6, 9, 0, 0)
const MINUTE = 60_000

/** Epoch ms `m` minutes after binding. */
export const at = (m: number): number => BOUND_AT + m * MINUTE
export const iso = (m: number): string => new Date(at(m)).toISOString()

/** Readings from [minute, temp_c] pairs. */
export function readings(...points: [minute: number, temp_c: number][]): Reading[] {
  return points.map(([m, temp_c]) => ({ ts: at(m), temp_c }))
}

/** One reading a minute from `from` to `to` (inclusive) at `temp_c`. */
export function everyMinute(from: number, to: number, temp_c: number): Reading[] {
  const out: Reading[] = []
  for (let m = from; m <= to; m++) out.push({ ts: at(m), temp_c })
  return out
}

/** Short limits so that random deliveries of a few hours hit every rule. */
export const quick = resolveProfile({
  name: 'quick',
  min_c: 2,
  max_c: 8,
  grace_s: 60,
  max_excursion_s: 600,
  max_cumulative_s: 900,
  hard_min_c: 0,
  hard_max_c: 14,
  mkt_max_c: 8,
  max_gap_s: 300,
})
