import { OpenAPIHono } from '@hono/zod-openapi'
import type { RateCardService } from '../../services/rate-cards.js'
import type { AppEnv } from '../env.js'
import { idParam, pageOf, pageQuery, v1Route, z } from '../openapi.js'

const cents = (what: string, max = 10_000_000) => z.number().int().min(0).max(max).describe(`${what}, in minor units of the currency`)

const rateCardExample = {
  fleet_id: 'fl_01jd0000000000000000000000',
  version: 2,
  currency: 'USD',
  base_fee_cents: 650,
  per_km_cents: 85,
  cold_chain_surcharge_cents: 300,
  failed_attempt_fee_cents: 400,
  after_hours_multiplier: 1.5,
  commission_bps: 1200,
  effective_from: '2026-12-01T00:00:00.000Z',
  created_at: '2026-11-23T18:00:00.000Z',
}

const NewRateCard = z
  .strictObject({
    currency: z
      .string()
      .regex(/^[A-Z]{3}$/, 'must be an ISO 4217 code such as USD')
      .describe("ISO 4217; every version of a fleet's rate card keeps the same one"),
    base_fee_cents: cents('Paid for each delivered delivery'),
    per_km_cents: cents('Paid per great-circle kilometre from pickup to the patient', 100_000),
    cold_chain_surcharge_cents: cents('Added for a delivered cold-chain delivery'),
    failed_attempt_fee_cents: cents('Paid instead of the delivery fees when a delivery ends FAILED or RETURNED'),
    after_hours_multiplier: z
      .number()
      .min(1)
      .max(10)
      .refine((m) => Math.abs(m * 10_000 - Math.round(m * 10_000)) < 1e-6, 'may have at most 4 decimals')
      .describe('Multiplies the fees of a delivery that ended before 08:00 or from 20:00 on, pharmacy local time'),
    commission_bps: z.number().int().min(0).max(10_000).describe('Our commission on the gross, in basis points (1200 = 12 %)'),
    effective_from: z.iso
      .datetime({ offset: true })
      .optional()
      .describe('When the version comes into force (RFC 3339, now or later); defaults to now'),
  })
  .openapi('NewRateCard', {
    example: {
      currency: 'USD',
      base_fee_cents: 650,
      per_km_cents: 85,
      cold_chain_surcharge_cents: 300,
      failed_attempt_fee_cents: 400,
      after_hours_multiplier: 1.5,
      commission_bps: 1200,
      effective_from: '2026-12-01T00:00:00Z',
    },
  })

const RateCard = z
  .object({
    fleet_id: z.string(),
    version: z.number().int().describe('1, 2, …: each PUT adds one; versions are never edited'),
    currency: z.string(),
    base_fee_cents: z.number().int(),
    per_km_cents: z.number().int(),
    cold_chain_surcharge_cents: z.number().int(),
    failed_attempt_fee_cents: z.number().int(),
    after_hours_multiplier: z.number(),
    commission_bps: z.number().int(),
    effective_from: z.string(),
    created_at: z.string(),
  })
  .openapi('RateCard', { example: rateCardExample })

const RateCardPage = pageOf(RateCard).openapi('RateCardPage', { example: { data: [rateCardExample], next_cursor: null } })

/** `…/rate-card`: the version in force, a new version (unrestricted clients only), the versions. */
export function rateCardRoutes(rateCards: RateCardService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}/rate-card',
      tags: ['Fleet money'],
      operationId: 'getFleetRateCard',
      summary: "The fleet's rate card in force now",
      description:
        "The fleet's own tokens and unrestricted clients; a pharmacy token gets 403, another fleet's 404. 404 as well while no version is in force.",
      request: { params: idParam('fl') },
      responses: {
        200: { description: 'The version in force', content: { 'application/json': { schema: RateCard, example: rateCardExample } } },
      },
    }),
    async (c) => c.json(await rateCards.current(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('fleet:write', {
      method: 'put',
      path: '/v1/fleets/{id}/rate-card',
      tags: ['Fleet money'],
      operationId: 'putFleetRateCard',
      summary: 'Add a rate card version',
      description:
        'Unrestricted clients only. Adds the next version; none is ever edited. A delivery is priced by the version in force at its dispatch.',
      request: { params: idParam('fl'), body: { content: { 'application/json': { schema: NewRateCard } }, required: true } },
      responses: {
        201: { description: 'The new version', content: { 'application/json': { schema: RateCard, example: rateCardExample } } },
      },
    }),
    async (c) => c.json(await rateCards.put(c.get('principal'), c.req.valid('param').id, c.req.valid('json')), 201),
  )

  app.openapi(
    v1Route('fleet:read', {
      method: 'get',
      path: '/v1/fleets/{id}/rate-card/versions',
      tags: ['Fleet money'],
      operationId: 'listFleetRateCardVersions',
      summary: "Every version of the fleet's rate card, oldest first",
      request: { params: idParam('fl'), query: pageQuery },
      responses: {
        200: {
          description: 'A page of versions',
          content: { 'application/json': { schema: RateCardPage, example: { data: [rateCardExample], next_cursor: null } } },
        },
      },
    }),
    async (c) => c.json(await rateCards.versions(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )
  return app
}
