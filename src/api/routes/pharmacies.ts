import { OpenAPIHono } from '@hono/zod-openapi'
import { npiCheckDigitHolds } from '../../domain/npi.js'
import { releasePolicies, writebackFormats, type PharmacyService } from '../../services/pharmacies.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { timeZoneSchema } from '../time-zone.js'

const Address = z
  .strictObject({
    line1: z.string().min(1).max(200),
    line2: z.string().max(200).optional(),
    city: z.string().min(1).max(100),
    region: z.string().min(1).max(100),
    postal_code: z.string().min(1).max(20),
    country: z.string().length(2).describe('ISO 3166-1 alpha-2'),
  })
  .openapi('Address')

const Location = z.strictObject({ lat: z.number().min(-90).max(90), lng: z.number().min(-180).max(180) }).openapi('Location')

const WritebackFormat = z
  .enum(writebackFormats)
  .describe(
    'rxtrace (the default): the outcome event as webhooks carry it; fhir-r4: an HL7 FHIR R4 transaction Bundle (MedicationDispense, Provenance, Observation) as application/fhir+json (docs/interop.md)',
  )

const NewPharmacy = z
  .strictObject({
    name: z.string().min(1).max(200),
    ncpdp_id: z
      .string()
      .regex(/^\d{7}$/, 'must be 7 digits')
      .optional(),
    npi: z
      .string()
      .regex(/^\d{10}$/, 'must be 10 digits')
      .refine((npi) => !/^\d{10}$/.test(npi) || npiCheckDigitHolds(npi), 'the check digit does not match: a digit is mistyped')
      .describe('National Provider Identifier: 10 digits, the last a check digit (Luhn over 80840 and the first nine)')
      .optional(),
    address: Address,
    timezone: timeZoneSchema,
    location: Location.optional(),
    writeback: z
      .strictObject({
        url: z.url().describe('Where delivery outcomes are POSTed (signed like webhooks)'),
        format: WritebackFormat.optional(),
      })
      .optional(),
    release_policy: z
      .enum(releasePolicies)
      .optional()
      .describe(
        'manual: every cold-chain break waits for a person; auto_within_budget (the default): an excursion every item’s product stability budget survives is not a break (docs/stability.md)',
      ),
  })
  .openapi('NewPharmacy')

// A plain object over the request's fields: the strict NewPharmacy would forbid the answer's own members.
const Pharmacy = z
  .object({
    ...NewPharmacy.shape,
    id: z.string(),
    ncpdp_id: z.string().nullable(),
    npi: z.string().nullable(),
    location: Location.nullable(),
    writeback: z
      .object({
        url: z.string(),
        format: WritebackFormat,
        secret: z
          .string()
          .nullable()
          .optional()
          .describe(
            'whsec_… signing secret, in the creation response only; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted',
          ),
      })
      .nullable(),
    created_at: z.string(),
    release_policy: z.enum(releasePolicies),
  })
  .openapi('Pharmacy')

export function pharmacyRoutes(pharmacies: PharmacyService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('pharmacies:write', {
      method: 'post',
      path: '/v1/pharmacies',
      operationId: 'createPharmacy',
      tags: ['Pharmacies'],
      summary: 'Register a pharmacy',
      request: jsonBody(NewPharmacy),
      responses: { 201: json(Pharmacy, 'The pharmacy') },
    }),
    async (c) =>
      c.json(await pharmacies.create(c.get('principal'), c.req.valid('json'), answerInTransaction(c, 201, ['/writeback/secret'])), 201),
  )

  app.openapi(
    v1Route('pharmacies:read', {
      method: 'get',
      path: '/v1/pharmacies/{id}',
      operationId: 'getPharmacy',
      tags: ['Pharmacies'],
      summary: 'Read a pharmacy',
      request: { params: idParam('ph') },
      responses: { 200: json(Pharmacy, 'The pharmacy') },
    }),
    async (c) => c.json(await pharmacies.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('pharmacies:read', {
      method: 'get',
      path: '/v1/pharmacies',
      operationId: 'listPharmacies',
      tags: ['Pharmacies'],
      summary: 'List pharmacies',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(Pharmacy), 'A page of pharmacies') },
    }),
    async (c) => c.json(await pharmacies.list(c.get('principal'), c.req.valid('query')), 200),
  )
  return app
}

export { Location }
