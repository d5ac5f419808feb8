import { OpenAPIHono } from '@hono/zod-openapi'
import { MAX_EMBED_TTL_S, type EmbedTokens } from '../../auth/embed-tokens.js'
import { iso } from '../../clock.js'
import { coldChainStates } from '../../domain/cold-chain.js'
import type { Db } from '../../store/schema.js'
import type { FleetDashboardService } from '../../services/fleet-dashboard.js'
import { fleetMoneyVisibleTo } from '../../services/fleet-money.js'
import type { AppEnv } from '../env.js'
import { idParam, v1Route, z } from '../openapi.js'

const statuses = ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'DELIVERED', 'FAILED', 'RETURNED', 'CANCELLED'] as const
const FL = 'fl_01jd0000000000000000000000'
const DL = 'dl_01jd0000000000000000000000'

const liveExample = {
  fleet_id: FL,
  timezone: 'America/Chicago',
  generated_at: '2026-11-23T18:00:00.000Z',
  counts: { QUEUED: 0, DISPATCHED: 3, PICKED_UP: 5, DELIVERED: 410, FAILED: 1, RETURNED: 2, CANCELLED: 4 },
  open_exceptions: {
    count: 1,
    items: [
      {
        delivery_id: DL,
        kind: 'cold_chain_excursion',
        since: '2026-11-23T17:52:10.000Z',
        status: 'PICKED_UP',
        driver_name: 'Dana Driver',
        pharmacy_name: 'Main Street Pharmacy',
        items: ['Insulin glargine 100 units/mL, 3 mL pen'],
      },
    ],
  },
  in_progress: {
    count: 8,
    items: [
      {
        delivery_id: DL,
        status: 'PICKED_UP',
        driver_id: 'dr_01jd0000000000000000000000',
        driver_name: 'Dana Driver',
        pharmacy_name: 'Main Street Pharmacy',
        items: ['Insulin glargine 100 units/mL, 3 mL pen'],
        tote_id: 'tt_01jd0000000000000000000000',
        eta: '2026-11-23T19:00:00.000Z',
        cold_chain: { required: true, state: 'EXCURSION', min_c: 3.1, max_c: 9.2 },
        updated_at: '2026-11-23T17:52:10.000Z',
        last_position: { lat: 39.7901, lng: -89.6442, accuracy_m: 12, at: '2026-11-23T17:58:40.000Z', distance_m: 1240 },
      },
    ],
  },
}

export const LiveView = z
  .object({
    fleet_id: z.string(),
    timezone: z.string().describe("The fleet's IANA time zone: the embedded page shows local times in it"),
    generated_at: z.string(),
    counts: z
      .object(Object.fromEntries(statuses.map((s) => [s, z.number().int()])) as Record<(typeof statuses)[number], z.ZodNumber>)
      .describe("The fleet's deliveries by status"),
    open_exceptions: z
      .object({
        count: z.number().int(),
        items: z
          .array(
            z.object({
              delivery_id: z.string(),
              kind: z.enum(['cold_chain_excursion', 'cold_chain_break', 'failed']),
              since: z
                .string()
                .describe('When the exception began (RFC 3339 UTC): the break, the start of the open excursion, or the failed attempt'),
              status: z.enum(statuses),
              driver_name: z.string().nullable(),
              pharmacy_name: z.string(),
              items: z
                .array(z.string())
                .describe("What is carried: each item's description as the pharmacy wrote it (its NDC when it has none)"),
            }),
          )
          .describe('The newest 100'),
      })
      .describe('Open deliveries whose cold chain is in excursion or broken, and failed deliveries not yet returned'),
    in_progress: z
      .object({
        count: z.number().int(),
        items: z
          .array(
            z.object({
              delivery_id: z.string(),
              status: z.enum(statuses),
              driver_id: z.string().nullable(),
              driver_name: z.string().nullable(),
              pharmacy_name: z.string(),
              items: z
                .array(z.string())
                .describe("What is carried: each item's description as the pharmacy wrote it (its NDC when it has none)"),
              tote_id: z.string().nullable(),
              eta: z.string(),
              cold_chain: z.object({
                required: z.boolean(),
                state: z.enum(coldChainStates),
                min_c: z.number().nullable(),
                max_c: z.number().nullable(),
              }),
              updated_at: z.string(),
              last_position: z
                .object({
                  lat: z.number(),
                  lng: z.number(),
                  accuracy_m: z.number().nullable(),
                  at: z.string().describe('When the driver’s app took it (RFC 3339 UTC)'),
                  distance_m: z
                    .number()
                    .int()
                    .nullable()
                    .describe('Straight-line metres to the delivery address; null when the address has no coordinates'),
                })
                .nullable()
                .describe('The driver’s newest position on this delivery; null before the first one'),
            }),
          )
          .describe('The 100 most recently changed'),
      })
      .describe('DISPATCHED and PICKED_UP deliveries'),
  })
  .openapi('FleetLiveView', { example: liveExample })

const Dashboard = LiveView.extend({
  period: z.object({ from: z.string(), to: z.string() }).describe('This period: the current calendar month, UTC'),
  on_time: z
    .object({ delivered: z.number().int(), on_time: z.number().int(), rate: z.number().nullable() })
    .describe('Deliveries delivered this period, and those delivered at or before their eta; rate null when none'),
  payout: z
    .object({ currency: z.string().nullable(), lines: z.number().int(), gross_cents: z.number().int(), payout_cents: z.number().int() })
    .describe("This period's reconciliation totals so far"),
}).openapi('FleetDashboard', {
  example: {
    ...liveExample,
    period: { from: '2026-11-01T00:00:00.000Z', to: '2026-12-01T00:00:00.000Z' },
    on_time: { delivered: 410, on_time: 388, rate: 0.9463 },
    payout: { currency: 'USD', lines: 413, gross_cents: 912800, payout_cents: 803264 },
  },
})

const NewEmbedSession = z
  .strictObject({
    ttl_s: z
      .number()
      .int()
      .min(1)
      .max(MAX_EMBED_TTL_S)
      .default(300)
      .describe(`How long the URL works, in seconds (at most ${MAX_EMBED_TTL_S})`),
  })
  .openapi('NewEmbedSession', { example: { ttl_s: 300 } })
const EmbedSession = z
  .object({
    url: z.string().describe("Put it in an iframe on one of the fleet's embed_origins; read-only, this fleet only"),
    expires_at: z.string(),
  })
  .openapi('EmbedSession', {
    example: {
      url: 'https://rxtrace.example.com/embed/dashboard?token=eyJhbGciOiJFUzI1NiIsInR5cCI6InJ4dHJhY2UtZW1iZWQrand0In0…',
      expires_at: '2026-11-23T18:05:00.000Z',
    },
  })

/** `GET /v1/fleets/{id}/dashboard` and `POST /v1/fleets/{id}/embed-sessions` (docs/fleet.md, Dashboard). */
export function fleetDashboardRoutes(deps: { db: Db; dashboards: FleetDashboardService; embedTokens: EmbedTokens; issuer: string }) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}/dashboard',
      tags: ['Fleet money'],
      operationId: 'getFleetDashboard',
      summary: "The fleet's dashboard as JSON",
      description:
        "Counts by status, open exceptions, deliveries in progress with their cold-chain state, the on-time rate and the payout so far this period. The fleet's own tokens and unrestricted clients only.",
      request: { params: idParam('fl') },
      responses: { 200: { description: 'The dashboard', content: { 'application/json': { schema: Dashboard } } } },
    }),
    async (c) => c.json(await deps.dashboards.dashboard(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'post',
      path: '/v1/fleets/{id}/embed-sessions',
      tags: ['Fleet money'],
      operationId: 'createFleetEmbedSession',
      summary: 'A short-lived signed URL of the dashboard page, for an iframe',
      description:
        "The page shows the live deliveries and exceptions (no payouts) in the fleet's branding, and may be framed only by the fleet's `embed_origins`. Nothing is stored: the URL carries its own signature and expiry.",
      request: { params: idParam('fl'), body: { content: { 'application/json': { schema: NewEmbedSession } }, required: false } },
      responses: { 201: { description: 'The embed session', content: { 'application/json': { schema: EmbedSession } } } },
    }),
    async (c) => {
      const fleet = await fleetMoneyVisibleTo(deps.db, c.get('principal'), c.req.valid('param').id)
      const { token, expiresAtMs } = await deps.embedTokens.issue(fleet.id, c.req.valid('json')?.ttl_s ?? 300)
      return c.json({ url: `${deps.issuer}/embed/dashboard?token=${token}`, expires_at: iso(expiresAtMs) }, 201)
    },
  )
  return app
}
