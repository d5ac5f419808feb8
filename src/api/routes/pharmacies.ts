import { OpenAPIHono } from '@hono/zod-openapi'
import { GLN_HELP, isGln } from '../../domain/gs1.js'
import { npiCheckDigitHolds } from '../../domain/npi.js'
import { calibrationPolicies } from '../../domain/sensor-calibration.js'
import { DEFAULT_ESCALATE_AFTER_S } from '../../alarms/alarm-records.js'
import { DEFAULT_MAX_ATTEMPTS } from '../../domain/delivery-machine.js'
import { releasePolicies, writebackFormats, type PharmacyService } from '../../services/pharmacies.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { timeZoneSchema } from '../time-zone.js'
import { identityDocuments } from '../../domain/proof-of-delivery.js'

/** docs/api.md, Proof of delivery: what a delivery needs before `deliver` is accepted. */
export const PodRequirements = z
  .strictObject({
    signature: z.boolean().optional().describe('A signature image naming the signer and their relationship to the patient'),
    photo: z.boolean().optional().describe('A photo of the handover'),
    pin: z.boolean().optional().describe('The PIN issued at dispatch, shown only on the patient’s tracking page'),
    barcode: z.boolean().optional().describe('A scan of the Rx label: the rx_id, or an item’s GTIN'),
    id_check: z
      .strictObject({
        minimum_age: z.number().int().min(0).max(125).describe('Years; 0 checks identity only'),
        document_types: z
          .array(z.enum(identityDocuments))
          .min(1)
          .max(identityDocuments.length)
          .optional()
          .describe('Accepted documents; any when left out'),
      })
      .optional()
      .describe('A government ID checked at the door'),
  })
  .openapi('PodRequirements')

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

// Ten attempts: a delivery sent out more often than that is not going to reach the patient.
const MAX_ATTEMPTS_LIMIT = 10

const policies = {
  release_policy: z
    .enum(releasePolicies)
    .describe(
      'manual: every cold-chain break waits for a person; auto_within_budget (the default): an excursion every item’s product stability budget survives is not a break (docs/stability.md)',
    ),
  calibration_policy: z
    .enum(calibrationPolicies)
    .describe(
      'A cold-chain dispatch whose tote’s sensor is past its calibration due date: refuse (the default, 409 sensor_calibration_due), warn (dispatched, the delivery and its report carry the warning), strict (also refuses a tote with no sensor record)',
    ),
  escalate_after_s: z
    .number()
    .int()
    .min(1)
    .max(7 * 86_400) // a week: an alarm left longer is not being watched at all
    .describe(`Seconds an alarm may stay unacknowledged before alarm.escalated; default ${DEFAULT_ESCALATE_AFTER_S}`),
  max_attempts: z
    .number()
    .int()
    .min(1)
    .max(MAX_ATTEMPTS_LIMIT)
    .describe(
      `Delivery attempts allowed, the first included: after that many failed attempts only \`return\` is left; default ${DEFAULT_MAX_ATTEMPTS}, at most ${MAX_ATTEMPTS_LIMIT}`,
    ),
}

const glnSchema = z
  .string()
  .regex(/^\d{13}$/, 'must be 13 digits')
  .refine((gln) => !/^\d{13}$/.test(gln) || isGln(gln), `the check digit does not match: ${GLN_HELP}`)
  .describe('GS1 Global Location Number: 13 digits, the last the GS1 check digit; names the pharmacy in EPCIS events as an SGLN')

// ITU-T E.164: a plus, a country code (never 0), at most 15 digits in all; no spaces or punctuation.
const phoneSchema = z
  .string()
  .regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 number: a plus, the country code and the number, digits only (+13125550142)')
  .describe("E.164 phone number the pharmacy's patients call: shown on the tracking page (docs/api.md, Tracking links)")

const patientNotifySchema = z
  .boolean()
  .describe(
    'true: the service raises `patient.notify` events (a tracking URL and the kind of message) for the pharmacy’s own SMS or e-mail provider to send; default false (docs/api.md, Patient notifications)',
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
    gln: glnSchema.optional(),
    phone: phoneSchema.optional(),
    patient_notify: patientNotifySchema.optional(),
    address: Address,
    timezone: timeZoneSchema,
    location: Location.optional(),
    writeback: z
      .strictObject({
        url: z.url().describe('Where delivery outcomes are POSTed (signed like webhooks)'),
        format: WritebackFormat.optional(),
      })
      .optional(),
    release_policy: policies.release_policy.optional(),
    calibration_policy: policies.calibration_policy.optional(),
    escalate_after_s: policies.escalate_after_s.optional(),
    max_attempts: policies.max_attempts.optional(),
    pod_requirements: PodRequirements.optional().describe('Proofs every delivery of the pharmacy needs; a prescription may add to them'),
  })
  .openapi('NewPharmacy')

// A plain object over the request's fields: the strict NewPharmacy would forbid the answer's own members.
const Pharmacy = z
  .object({
    ...NewPharmacy.shape,
    id: z.string(),
    ncpdp_id: z.string().nullable(),
    npi: z.string().nullable(),
    gln: z.string().nullable(),
    phone: z.string().nullable(),
    patient_notify: z.boolean(),
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
    ...policies,
    pod_requirements: PodRequirements.nullable().optional().describe('null: none required'),
  })
  .openapi('Pharmacy')

const PharmacyChanges = z
  .strictObject({
    release_policy: policies.release_policy.optional(),
    calibration_policy: policies.calibration_policy.optional(),
    escalate_after_s: policies.escalate_after_s.optional(),
    max_attempts: policies.max_attempts.optional(),
    gln: glnSchema.nullable().optional().describe('null removes it: EPCIS events then name the pharmacy by its URL'),
    pod_requirements: PodRequirements.nullable()
      .optional()
      .describe('Replaces them whole; null requires none. Deliveries already dispatched keep the ones their dispatch fixed'),
    phone: phoneSchema.nullable().optional().describe('null removes it: the tracking page then shows no number'),
    patient_notify: patientNotifySchema.optional(),
  })
  .refine((changes) => Object.keys(changes).length > 0, 'name at least one member to change')
  .openapi('PharmacyChanges')

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
    v1Route('pharmacies:write', {
      method: 'patch',
      path: '/v1/pharmacies/{id}',
      operationId: 'updatePharmacy',
      tags: ['Pharmacies'],
      summary: "Change a pharmacy's policies and contact",
      description: 'Members left out keep their value. Alarms already raised keep the escalation time they were raised with.',
      request: { params: idParam('ph'), ...jsonBody(PharmacyChanges) },
      responses: { 200: json(Pharmacy, 'The pharmacy as changed') },
    }),
    async (c) => c.json(await pharmacies.update(c.get('principal'), c.req.valid('param').id, c.req.valid('json')), 200),
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
