import { z } from 'zod'
import { excursionSummarySchema } from '../../rules/index.js'
import { coldChainSchema } from './cold-chain.js'

/**
 * The pharmacist's temperature trace of one delivery: the one definition of its shape, for
 * `timeseries/trace.ts` that builds it and the OpenAPI component that documents it.
 */

export const tracePointSchema = z.object({
  t: z.string().describe('Bucket start, RFC 3339 UTC; buckets are aligned to multiples of the step'),
  min: z.number(),
  max: z.number(),
  avg: z.number().describe('0.01 °C'),
  n: z.number().int().describe('Readings in the bucket; empty buckets are left out'),
})
export type TracePoint = z.infer<typeof tracePointSchema>

/** An excursion as the delivery's `cold_chain` block lists it. */
export const traceExcursionSchema = excursionSummarySchema
export type TraceExcursion = z.infer<typeof traceExcursionSchema>

const traceSummarySchema = coldChainSchema.pick({ min_c: true, max_c: true, mkt_c: true, time_out_of_range_s: true }).extend({
  time_out_of_range_s: z
    .number()
    .describe(
      "Cumulative out-of-range time up to as_of: the rule engine's figure, plus the sensor gap of a tote silent since its last reading",
    ),
  unknown_s: z.number().describe('Of which sensor-gap (unknown) time, up to as_of'),
  as_of: z
    .string()
    .describe(
      'The instant the trace and its summary hold at (RFC 3339 UTC): the window end; for an open delivery, the later of now and the newest reading',
    ),
  scope: z
    .enum(['delivery', 'window'])
    .describe(
      "`delivery`: the whole delivery as the rule engine judged it. `window`: the window is narrower than the delivery, so min_c/max_c are those of the points in it; mkt_c and time_out_of_range_s stay the whole delivery's",
    ),
})
export type TraceSummary = z.infer<typeof traceSummarySchema>

export const temperatureTraceSchema = z.object({
  delivery_id: z.string(),
  rx_id: z.string().describe('The prescription the delivery carries'),
  unit: z.literal('Cel').describe('SenML unit (RFC 8428): degrees Celsius'),
  profile: coldChainSchema.shape.profile,
  from: z.string(),
  to: z.string().describe('Window end; equals summary.as_of'),
  step_s: z.number(),
  points: z.array(tracePointSchema),
  excursions: z.array(traceExcursionSchema).describe('The excursions overlapping the window'),
  summary: traceSummarySchema,
})
export type TemperatureTrace = z.infer<typeof temperatureTraceSchema>
