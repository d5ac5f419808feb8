import { OpenAPIHono } from '@hono/zod-openapi'
import type { Clock } from '../../clock.js'
import { temperatureTraceSchema, traceExcursionSchema, tracePointSchema } from '../../domain/temperature-trace.js'
import type { DeliveryService } from '../../services/deliveries.js'
import type { ReadingSink } from '../../timeseries/sink.js'
import { DEFAULT_STEP, MAX_POINTS, readTrace, traceWindow } from '../../timeseries/trace.js'
import { CSV_MEDIA_TYPE, traceCsv } from '../../timeseries/trace-csv.js'
import { traceSvg } from '../../timeseries/trace-svg.js'
import type { AppEnv } from '../env.js'
import { component, idParam, v1Route, z } from '../openapi.js'

const TraceQuery = z.object({
  from: z.iso.datetime({ offset: true }).optional().describe("Window start (RFC 3339); defaults to the tote's binding start (dispatch)"),
  to: z.iso
    .datetime({ offset: true })
    .optional()
    .describe('Window end (RFC 3339); defaults to the end of the delivery, or now while it is open'),
  step: z
    .string()
    .regex(/^\d+(\.\d+)?(ms|s|m|h|d)$/, 'must be a duration such as 30s, 5m or 1h')
    .default(DEFAULT_STEP)
    .describe(`Bucket size: at least 1s, and at most ${MAX_POINTS} buckets in the window`),
})

const TemperatureTrace = temperatureTraceSchema
  .extend({
    points: z.array(component(tracePointSchema, 'TracePoint')),
    excursions: z.array(component(traceExcursionSchema, 'TraceExcursion')).describe('The excursions overlapping the window'),
  })
  .openapi('TemperatureTrace')

/** `GET /v1/deliveries/{id}/temperature` (JSON or CSV) and `…/temperature.svg` (README, Telemetry over MQTT). */
export function temperatureRoutes(deliveries: DeliveryService, sink: ReadingSink, clock: Clock) {
  const app = new OpenAPIHono<AppEnv>()

  app.openapi(
    v1Route('telemetry:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/temperature',
      operationId: 'getTemperatureTrace',
      tags: ['Telemetry'],
      summary: 'Temperature trace of a delivery, in steps',
      description: 'JSON by default; `Accept: text/csv` gives the points as RFC 4180 CSV (`t,min_c,max_c,avg_c,n`).',
      request: { params: idParam('dl'), query: TraceQuery },
      responses: {
        200: {
          description: 'The trace',
          content: {
            'application/json': { schema: TemperatureTrace },
            'text/csv': { schema: z.string().describe('t,min_c,max_c,avg_c,n') },
          },
        },
      },
    }),
    async (c) => {
      const delivery = await deliveries.get(c.get('principal'), c.req.valid('param').id)
      const trace = await readTrace(sink, delivery, traceWindow(delivery, c.req.valid('query'), clock.now()))
      if (prefersCsv(c.req.header('accept'))) {
        return c.body(traceCsv(trace), 200, {
          'content-type': CSV_MEDIA_TYPE,
          'content-disposition': `inline; filename="${delivery.id}-temperature.csv"`,
          vary: 'Accept',
        })
      }
      c.header('vary', 'Accept')
      return c.json(trace, 200)
    },
  )

  app.openapi(
    v1Route('telemetry:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/temperature.svg',
      operationId: 'getTemperatureChart',
      tags: ['Telemetry'],
      summary: 'Temperature trace as a chart',
      description:
        "A 900×360 SVG: allowed band, hard limits, min–max envelope, average, excursions, with times in the pharmacy's time zone. Same query as the trace.",
      request: { params: idParam('dl'), query: TraceQuery },
      responses: { 200: { description: 'The chart', content: { 'image/svg+xml': { schema: z.string() } } } },
    }),
    async (c) => {
      const delivery = await deliveries.get(c.get('principal'), c.req.valid('param').id)
      const trace = await readTrace(sink, delivery, traceWindow(delivery, c.req.valid('query'), clock.now()))
      const svg = traceSvg(trace, {
        timeZone: await deliveries.timeZoneOf(delivery),
        status: delivery.status,
        coldChainState: delivery.cold_chain.state,
        brokenAt: delivery.cold_chain.broken_at,
        breakReason: delivery.cold_chain.break_reason,
      })
      return c.body(svg, 200, { 'content-type': 'image/svg+xml; charset=utf-8' })
    },
  )
  return app
}

/** Content negotiation (RFC 9110 §12.5.1) between JSON and CSV; JSON wins ties and unknowns. */
export function prefersCsv(accept: string | undefined): boolean {
  if (!accept) return false
  const quality = (type: string) => {
    let best = -1
    for (const range of accept.split(',')) {
      const [media, ...params] = range
        .trim()
        .toLowerCase()
        .split(';')
        .map((s) => s.trim())
      const q = Number(params.find((p) => p.startsWith('q='))?.slice(2) ?? 1)
      const [main] = type.split('/')
      if (media === type || media === `${main}/*` || media === '*/*') best = Math.max(best, media === type ? q + 1e-6 : q)
    }
    return best
  }
  const csv = quality('text/csv')
  return csv > 0 && csv > quality('application/json')
}
