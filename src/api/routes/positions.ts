import { OpenAPIHono } from '@hono/zod-openapi'
import type { Clock } from '../../clock.js'
import { MAX_ACCURACY_M, MAX_CLOCK_SKEW_MS, MAX_POSITIONS_PER_BATCH, positionProblems, ROUTER_ETA_HOLD_MS } from '../../domain/eta.js'
import { validationFailed } from '../../errors.js'
import { MAX_POSITIONS_PER_PAGE, type DriverPositionService } from '../../services/driver-positions.js'
import type { AppEnv } from '../env.js'
import { idParam, json, jsonBody, problem, v1Route, z } from '../openapi.js'

const Position = z
  .strictObject({
    lat: z.number().min(-90).max(90).describe('WGS 84 latitude, degrees'),
    lng: z.number().min(-180).max(180).describe('WGS 84 longitude, degrees'),
    accuracy_m: z.number().min(0).max(MAX_ACCURACY_M).describe('Horizontal accuracy (radius), metres'),
    at: z.iso
      .datetime({ offset: true })
      .describe(`When the fix was taken (RFC 3339); at most ${MAX_CLOCK_SKEW_MS / 1_000} s ahead of the service's clock`),
  })
  .openapi('Position')

const PositionBatch = z.strictObject({ positions: z.array(Position).min(1).max(MAX_POSITIONS_PER_BATCH) }).openapi('PositionBatch', {
  example: { positions: [{ lat: 41.8819, lng: -87.6278, accuracy_m: 8, at: '2026-11-29T14:05:00Z' }] },
})

const Recorded = z
  .object({
    accepted: z.number().int().describe('Positions taken (a position already stored for the same instant is kept once)'),
    delivery_ids: z.array(z.string()).describe("The driver's deliveries in progress the positions were recorded for"),
  })
  .openapi('PositionsRecorded')

const StoredPosition = z
  .object({
    lat: z.number(),
    lng: z.number(),
    accuracy_m: z.number(),
    at: z.string().describe('When the fix was taken (RFC 3339 UTC)'),
    driver_id: z.string().describe('The driver who sent it'),
  })
  .openapi('StoredPosition')

const PositionPage = z
  .object({
    data: z.array(StoredPosition),
    next_cursor: z.string().nullable().describe('Pass as `after` for the next page (as `before` with `order=desc`); null at the end'),
  })
  .openapi('PositionPage')

const PositionQuery = z.object({
  after: z.iso.datetime().optional().describe('Only positions taken after this time (the previous page’s `next_cursor`)'),
  before: z.iso
    .datetime()
    .optional()
    .describe('Only positions taken before this time (the previous page’s `next_cursor` with `order=desc`)'),
  order: z
    .enum(['asc', 'desc'])
    .default('asc')
    .describe('`asc`: oldest first; `desc`: newest first (`order=desc&limit=1` is where the driver was last seen)'),
  limit: z.coerce.number().int().min(1).max(MAX_POSITIONS_PER_PAGE).default(100).describe(`Page size, 1–${MAX_POSITIONS_PER_PAGE}`),
})

const RouterEta = z
  .strictObject({ eta: z.iso.datetime({ offset: true }).describe('When the fleet’s router expects the goods at the patient (RFC 3339)') })
  .openapi('RouterEta', { example: { eta: '2026-11-29T14:40:00Z' } })

const EtaInForce = z
  .object({
    eta: z.string().describe('The delivery’s ETA now'),
    source: z.literal('router'),
    until: z
      .string()
      .describe(`The router’s ETA wins over the computed one until then (${ROUTER_ETA_HOLD_MS / 60_000} min after the post)`),
  })
  .openapi('EtaInForce')

/** Drivers' positions and the live ETA (docs/fleet.md, Live location and ETA). */
export function positionRoutes(positions: DriverPositionService, clock: Clock) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('custody:write', {
      method: 'post',
      path: '/v1/drivers/{id}/locations',
      operationId: 'postDriverLocations',
      tags: ['Fleets'],
      summary: "Record a driver's positions",
      description: `A batch of 1–${MAX_POSITIONS_PER_BATCH} positions, recorded for each of the driver's deliveries in progress (DISPATCHED or PICKED_UP) and recomputing the ETA of those PICKED_UP. The driver's own user, its fleet, or an unrestricted client; anyone else (another fleet's driver included) gets 404. A position more than ${MAX_CLOCK_SKEW_MS / 1_000} s in the future is refused (422).`,
      request: { params: idParam('dr'), ...jsonBody(PositionBatch) },
      responses: {
        200: json(Recorded, 'Recorded'),
        409: problem('`not_on_delivery`: the driver has no delivery in progress'),
      },
    }),
    async (c) => {
      const { positions: batch } = c.req.valid('json')
      const problems = batch.flatMap((p, i) => positionProblems(p, clock.now(), `/positions/${i}`))
      if (problems.length) throw validationFailed(problems)
      return c.json(await positions.post(c.get('principal'), c.req.valid('param').id, batch), 200)
    },
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/locations',
      operationId: 'listDeliveryLocations',
      tags: ['Deliveries'],
      summary: "A delivery's driver positions, oldest first (or newest first)",
      description:
        "The delivery's pharmacy, its fleet and its driver only. Kept while the delivery is in progress and for POSITION_RETENTION_DAYS after it ends. `order=desc&limit=1` gives the newest position alone.",
      request: { params: idParam('dl'), query: PositionQuery },
      responses: { 200: json(PositionPage, 'A page of positions') },
    }),
    async (c) => c.json(await positions.list(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('custody:write', {
      method: 'put',
      path: '/v1/deliveries/{id}/eta',
      operationId: 'putDeliveryEta',
      tags: ['Deliveries'],
      summary: "Post the fleet router's ETA for a delivery",
      description: `The delivery's fleet (its router, a dispatcher, or the delivery's driver) or an unrestricted client; a pharmacy token gets 403. The delivery must be PICKED_UP. The posted ETA is the delivery's \`eta\` for ${ROUTER_ETA_HOLD_MS / 60_000} minutes, over the one computed from positions; \`delivery.eta-changed\` follows the usual rules.`,
      request: { params: idParam('dl'), ...jsonBody(RouterEta) },
      responses: {
        200: json(EtaInForce, 'The ETA in force'),
        409: problem('`not_on_delivery`: the delivery is not on its way to the patient'),
      },
    }),
    async (c) => c.json(await positions.setRouterEta(c.get('principal'), c.req.valid('param').id, c.req.valid('json').eta), 200),
  )
  return app
}
