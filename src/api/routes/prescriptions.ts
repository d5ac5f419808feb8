import { OpenAPIHono } from '@hono/zod-openapi'
import { customProfileSchema } from '../../../rules/profile-schema.js'
import { GTIN_HELP, gtin14, SERIAL_PATTERN } from '../../domain/gs1.js'
import type { PrescriptionService } from '../../services/prescriptions.js'
import type { RedeliveryService } from '../../services/redeliveries.js'
import { Delivery } from './deliveries.js'
import { PodRequirements } from './pharmacies.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, problem, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'

const ProfileName = z.enum(['refrigerated', 'frozen', 'controlled_room'])

/**
 * Free-form, plus optional WGS 84 `lat`/`lng` (both or neither): with them, the ETA follows the
 * driver's positions and `delivery.arriving` is sent (docs/fleet.md, Live location and ETA).
 */
const DeliveryAddress = z
  .looseObject({
    lat: z.number().min(-90).max(90).optional().describe('WGS 84 latitude of the door, degrees'),
    lng: z.number().min(-180).max(180).optional().describe('WGS 84 longitude of the door, degrees'),
  })
  .refine((a) => (a.lat === undefined) === (a.lng === undefined), { message: 'needs both lat and lng, or neither', path: ['lng'] })
  .describe('The address, free-form; `lat`/`lng` (both or neither) let the service compute an ETA from the driver’s positions')

const NewPrescription = z
  .strictObject({
    patient_id: z.string().min(1).max(128).describe('Opaque patient identifier; never sent in webhooks'),
    cold_chain: z.boolean(),
    pharmacy_id: z.string().optional().describe("Defaults to the token's pharmacy"),
    temperature_profile: z
      .union([ProfileName, customProfileSchema])
      .optional()
      .describe('Built-in name or custom thresholds; cold chain without one → refrigerated'),
    deliver_by: z.iso.datetime({ offset: false }).optional().describe('RFC 3339 UTC; becomes the ETA'),
    delivery_address: DeliveryAddress.optional(),
    items: z
      .array(
        z
          .strictObject({
            description: z.string().min(1).max(500),
            ndc: z
              .string()
              .regex(/^\d{4,5}-?\d{3,4}-?\d{1,2}$/, 'must be an NDC such as 0002-8215-01')
              .optional(),
            quantity: z.number().int().positive(),
            gtin: z
              .string()
              .refine((gtin) => gtin14(gtin) !== null, GTIN_HELP)
              .optional()
              .describe('GS1 GTIN of the item; without one, EPCIS names the item by its NDC as a GTIN-14 (docs/interop.md)'),
            serials: z
              .array(z.string().regex(SERIAL_PATTERN, 'must be a GS1 serial: 1–20 characters of GS1 AI set 82'))
              .min(1)
              .max(100)
              .optional()
              .describe('Serial numbers of the units (GS1 AI 21), one per unit: EPCIS lists them as SGTINs'),
          })
          .refine((item) => !item.serials || item.serials.length === item.quantity, {
            path: ['serials'],
            message: 'needs one serial per unit: as many as quantity',
          })
          .refine((item) => !item.serials || item.gtin !== undefined || item.ndc !== undefined, {
            path: ['serials'],
            message: 'serialised units need the item’s gtin or ndc',
          }),
      )
      .max(100)
      .optional(),
    external_ref: z.string().max(255).optional(),
    metadata: z
      .record(z.string().max(40), z.string().max(500))
      .refine((m) => Object.keys(m).length <= 20, 'at most 20 keys')
      .optional(),
    pod_requirements: PodRequirements.optional().describe(
      'Proofs this prescription adds to its pharmacy’s (a controlled substance: an ID check); it never removes one',
    ),
  })
  .openapi('NewPrescription')

const Prescription = z
  .object({
    rx_id: z.string(),
    status: z.string(),
    eta: z.string(),
    audit_hash: z.string().regex(/^sha256:[0-9a-f]{64}$/),
    delivery_id: z.string(),
    pharmacy_id: z.string(),
    patient_id: z.string(),
    cold_chain: z.boolean(),
    temperature_profile: z.record(z.string(), z.unknown()).nullable(),
    deliver_by: z.string().nullable(),
    delivery_address: z.record(z.string(), z.unknown()).nullable(),
    items: z.array(z.record(z.string(), z.unknown())),
    external_ref: z.string().nullable(),
    metadata: z.record(z.string(), z.string()),
    created_at: z.string(),
    pod_requirements: PodRequirements.nullable().optional().describe('What this prescription adds to its pharmacy’s; null: nothing'),
  })
  .openapi('Prescription')

export function prescriptionRoutes(prescriptions: PrescriptionService, redeliveries: RedeliveryService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('prescriptions:write', {
      method: 'post',
      path: '/v1/prescriptions',
      operationId: 'createPrescription',
      tags: ['Prescriptions'],
      summary: 'Queue a delivery for a prescription',
      description: 'Requires `Idempotency-Key`. A replay returns the stored response with `Idempotent-Replayed: true`.',
      request: { ...jsonBody(NewPrescription), headers: z.object({ 'idempotency-key': z.string().min(1).max(255) }) },
      responses: {
        201: json(Prescription, 'Queued'),
        409: problem('`idempotency_in_progress`: a request with this Idempotency-Key is still running'),
      },
    }),
    async (c) => {
      const created = await prescriptions.create(c.get('principal'), c.req.valid('json'), answerInTransaction(c, 201))
      return c.json(created, 201)
    },
  )

  app.openapi(
    v1Route('prescriptions:read', {
      method: 'get',
      path: '/v1/prescriptions/{id}',
      operationId: 'getPrescription',
      tags: ['Prescriptions'],
      summary: 'Read a prescription',
      request: { params: idParam('rx') },
      responses: { 200: json(Prescription, 'The prescription') },
    }),
    async (c) => c.json(await prescriptions.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('prescriptions:read', {
      method: 'get',
      path: '/v1/prescriptions',
      operationId: 'listPrescriptions',
      tags: ['Prescriptions'],
      summary: 'List prescriptions',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(Prescription), 'A page of prescriptions') },
    }),
    async (c) => c.json(await prescriptions.list(c.get('principal'), c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('prescriptions:write', {
      method: 'post',
      path: '/v1/prescriptions/{id}/redeliver',
      operationId: 'redeliverPrescription',
      tags: ['Prescriptions'],
      summary: 'Send a returned, released prescription out again (its next leg)',
      description:
        'Creates leg n + 1 of the prescription: a new QUEUED delivery, dispatched like any other, whose stability ledger starts from what the earlier legs consumed. Only when the latest leg is `RETURNED` with a `release` disposition by a person, and no item is exhausted. Requires `Idempotency-Key` (docs/stability.md, Redelivery).',
      request: { params: idParam('rx'), headers: z.object({ 'idempotency-key': z.string().min(1).max(255) }) },
      responses: {
        201: json(Delivery, 'The new leg'),
        409: problem(
          '`not_released` (the latest leg is not returned and released by a person), `stability_exhausted` (with `items`), `conflict` (another redelivery made the leg meanwhile) or `idempotency_in_progress`',
        ),
      },
    }),
    async (c) => {
      const created = await redeliveries.redeliver(c.get('principal'), c.req.valid('param').id, answerInTransaction(c, 201))
      return c.json(created, 201)
    },
  )
  return app
}
