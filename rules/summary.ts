// The cold-chain part of a delivery as the rule engine sums it up: one zod schema, from which the
// service derives the delivery's `cold_chain` block, the temperature trace and their OpenAPI.
import { z } from 'zod'
import { breakReasons, excursionKinds, rfc3339, roundCelsius } from './events.js'
import { mktOf } from './mkt.js'
import type { ColdChainState } from './state.js'

export const excursionSummarySchema = z.object({
  started_at: z.string(),
  ended_at: z.string().nullable().describe('Null while the excursion is going on'),
  duration_s: z.number().describe('Up to ended_at, or up to the last evaluated reading while open'),
  peak_c: z.number().nullable().describe('The reading farthest outside the range; null when the excursion was only sensor-gap time'),
  kind: z.enum(excursionKinds),
})
export type ExcursionSummary = z.infer<typeof excursionSummarySchema>

export const coldChainSummarySchema = z.object({
  state: z
    .enum(['OK', 'EXCURSION', 'BROKEN'])
    .describe('BROKEN once broken (for good); EXCURSION while an announced excursion is open; else OK'),
  min_c: z.number().nullable(),
  max_c: z.number().nullable(),
  mkt_c: z
    .number()
    .nullable()
    .describe('USP <1079.2> MKT over known time, 0.01 °C; the single reading before any time is covered; null without readings'),
  time_out_of_range_s: z
    .number()
    .describe('Cumulative out-of-range time, grace and sensor gaps included, up to the last evaluated reading'),
  unknown_s: z.number().describe('Of which sensor-gap (unknown) time'),
  excursions: z.array(excursionSummarySchema).describe('Intervals that outlasted grace_s, oldest first'),
  break: z.object({ reason: z.enum(breakReasons), at: z.string() }).nullable(),
})
export type ColdChainSummary = z.infer<typeof coldChainSummarySchema>

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
