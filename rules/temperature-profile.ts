// A resolved temperature profile (SPEC §5): what the rule engine judges against and what a
// delivery shows. One zod schema; the TypeScript type derives from it.
import { z } from 'zod'
import type { StabilityPlan } from './stability-ledger.js'

export const temperatureProfileSchema = z.object({
  name: z.string(),
  min_c: z.number().describe('Allowed range, inclusive, °C'),
  max_c: z.number(),
  grace_s: z.number().describe('How long a reading may stay out of range before it counts as an excursion'),
  max_excursion_s: z.number().describe('One excursion (out-of-range interval) longer than this is a break'),
  max_cumulative_s: z.number().describe('Total out-of-range time allowed per delivery; never resets'),
  hard_min_c: z.number().nullable().describe('Crossing either hard limit is an immediate break; null = no hard limit on that side'),
  hard_max_c: z.number().nullable(),
  mkt_max_c: z.number().nullable().describe('Mean kinetic temperature limit (USP <1079.2>); null = MKT not judged'),
  max_gap_s: z.number().nullable().describe('Sensor silence longer than this is a gap; null = readings hold until the next one'),
})
/**
 * `stability`: the delivery's items judged by their products' stability data (rules/README.md,
 * Stability budgets). Attached in memory by the service to the profile it evaluates with; never part
 * of the profile a delivery shows.
 */
export type TemperatureProfile = z.infer<typeof temperatureProfileSchema> & { stability?: StabilityPlan | undefined }
