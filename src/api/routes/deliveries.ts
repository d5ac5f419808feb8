import { OpenAPIHono } from '@hono/zod-openapi'
import type { Context } from 'hono'
import type { SignatureAuthority } from '../../auth/e-signatures.js'
import { MAX_PASSWORD_LENGTH } from '../../auth/passwords.js'
import { dispositionMeaning, signatureMeanings, storedSignatureSchema } from '../../domain/e-signature.js'
import type { DeliveryService } from '../../services/deliveries.js'
import type { ActionInput } from '../../services/delivery-shapes.js'
import { deliveryExpansions, type DeliveryExpansion } from '../../services/delivery-list.js'
import { coldChainSchema, coldChainStates } from '../../domain/cold-chain.js'
import { stabilitySummarySchema } from '../../../rules/stability-summary.js'
import { deliveryStatuses } from '../../domain/delivery-machine.js'
import { failureReasons } from '../../domain/custody-event.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { component, idParam, json, problem, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'
import { Location, PodRequirements } from './pharmacies.js'
import { identityDocuments } from '../../domain/proof-of-delivery.js'

const attachmentId = z.string().regex(/^at_[0-9a-z]{1,60}$/, 'must be an attachment id (at_…) from POST /v1/deliveries/{id}/attachments')

/** docs/api.md, Proof of delivery: what the driver names in `deliver`. */
const Proof = z
  .strictObject({
    photo: attachmentId.optional().describe('A photo of the handover, uploaded for this delivery'),
    pin: z
      .string()
      .regex(/^\d{4,6}$/, 'must be the 4–6 digits the patient was given')
      .optional()
      .describe('The PIN the patient says; compared by the service, 5 wrong tries'),
    signature: z
      .strictObject({
        attachment: attachmentId.describe('The signature image, uploaded for this delivery'),
        signer_name: z.string().trim().min(1).max(200),
        relationship: z.string().trim().min(1).max(100).describe('To the patient: `self`, `spouse`, `caregiver`, …'),
      })
      .optional(),
    id_check: z
      .strictObject({
        document_type: z.enum(identityDocuments),
        minimum_age: z.number().int().min(0).max(125).describe('The age the driver verified the person is at least'),
        birth_date_verified: z.boolean(),
      })
      .optional(),
    barcode: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .optional()
      .describe('The scanned Rx label: the rx_id or an item’s GTIN (a GS1 (01) element string too)'),
  })
  .openapi('ProofOfDelivery')

const Evidence = z
  .object({
    photo: z.object({ attachment: z.string(), sha256: z.string() }).optional(),
    signature: z.object({ attachment: z.string(), sha256: z.string(), signer_name: z.string(), relationship: z.string() }).optional(),
    id_check: z.object({ document_type: z.string(), minimum_age: z.number().int(), birth_date_verified: z.boolean() }).optional(),
    barcode: z.string().optional(),
    pin: z.literal('verified').optional().describe('The PIN was compared and held; the PIN itself is never recorded'),
  })
  .openapi('DeliveryEvidence')

const when = {
  occurred_at: z.iso.datetime({ offset: false }).optional().describe('When it physically happened (RFC 3339 UTC); defaults to now'),
  location: Location.optional(),
}
const party = z.string().regex(/^((us|dr|ph)_[0-9a-z]+|patient)$/, 'must be a party id (us_…, dr_…, ph_…) or "patient"')
const signature = z
  .string()
  .min(1)
  .max(200_000)
  .describe('Signature image as a data URL, or a signed statement; its sha256 becomes evidence_hash')

/** A person's e-signature (docs/part11.md): the password is checked at this moment and kept nowhere. */
export const SignatureInput = z
  .strictObject({
    meaning: z.enum(signatureMeanings).describe('What the signature means; a disposition is `released` or `returned`, as its decision'),
    password: z
      .string()
      .min(1)
      .max(MAX_PASSWORD_LENGTH)
      .optional()
      .describe('The signer’s password, entered again to sign; may be left out within 300 s of signing in (RFC 9470 `max_age`)'),
  })
  .openapi('SignatureInput')

const CustodyEvent = z
  .object({
    seq: z.number().int(),
    type: z.string(),
    actor: z.object({ client_id: z.string(), sub: z.string() }),
    from: z.string().nullable(),
    to: z.string().nullable(),
    location: Location.nullable(),
    evidence_hash: z.string().nullable(),
    occurred_at: z.string(),
    recorded_at: z.string(),
    prev_hash: z.string(),
    hash: z.string(),
    temperature: z
      .object({
        last_c: z.number().nullable().describe('The newest reading of the tote at or before occurred_at, °C; null when there was none yet'),
        at: z.string().nullable().describe('When that reading was taken (RFC 3339 UTC); null with last_c'),
        state: z.enum(['OK', 'EXCURSION', 'BROKEN']).describe('The cold-chain state judged for occurred_at'),
      })
      .optional()
      .describe(
        'On events of a cold-chain delivery (absent without a cold chain, and on events recorded before it was kept): the temperature at that moment, inside the hash (docs/api.md, Temperature at each handoff)',
      ),
    attempt: z
      .object({
        number: z.number().int().min(1),
        reason: z.enum(failureReasons).optional(),
        note: z.string().nullable().optional(),
      })
      .optional()
      .describe('On `failed` events: the attempt that failed, its reason and note; on `reattempted` events: the attempt it starts'),
    signature: component(storedSignatureSchema, 'Signature')
      .optional()
      .describe('On a `signed` event: the e-signature of the event just before it, bound to it by `record_hash`'),
    evidence: Evidence.optional().describe('On a `delivered` event with proofs: each image’s sha256 and the other proofs, inside the hash'),
  })
  .openapi('CustodyEvent')

export const Delivery = z
  .object({
    id: z.string(),
    rx_id: z.string(),
    leg: z.number().int().min(1).describe('1, or n + 1 for the n-th redelivery of the same prescription'),
    pharmacy_id: z.string(),
    status: z.enum(deliveryStatuses),
    eta: z
      .string()
      .describe(
        'When the goods are expected at the patient: the promised time (`deliver_by`), then the live ETA from the driver’s positions or the fleet’s router once the delivery is on its way (docs/fleet.md, Live location and ETA)',
      ),
    fleet_id: z.string().nullable(),
    driver_id: z.string().nullable(),
    tote_id: z.string().nullable(),
    cold_chain: component(coldChainSchema, 'ColdChain'),
    stability: component(stabilitySummarySchema, 'StabilityLedger')
      .optional()
      .describe("Each item's stability budget over every leg; present when the delivery's items name products (docs/stability.md)"),
    release: z
      .object({
        by: z.literal('system'),
        rule: z.literal('stability_budget'),
        versions: z.array(z.object({ ndc: z.string(), product_id: z.string(), version: z.number().int() })),
        remaining_fraction: z.number(),
        at: z.string().describe('When it was delivered'),
      })
      .optional()
      .describe("Present when delivered within every item's stability budget under the pharmacy's auto_within_budget policy"),
    warnings: z
      .array(
        z.object({
          code: z.enum(['sensor_calibration_due', 'sensor_unrecorded']),
          message: z.string(),
          tote_id: z.string(),
          sensor_serial: z.string().nullable(),
          calibration_due: z.string().nullable(),
        }),
      )
      .optional()
      .describe(
        "What the dispatch warned of: the tote's sensor past its calibration due date (the pharmacy's calibration_policy warn), or no sensor record",
      ),
    attempt: z.number().int().min(1).describe('The attempt under way or last made: 1, plus one per reattempt (docs/api.md, Attempts)'),
    attempts: z
      .array(
        z.object({
          number: z.number().int().min(1),
          started_at: z.string().describe('The dispatch, or the reattempt'),
          failed_at: z.string().nullable(),
          reason: z.enum(failureReasons).nullable().describe('Why it failed; null while it has not (or failed before reasons were coded)'),
          note: z.string().nullable(),
        }),
      )
      .describe('Each attempt since the dispatch, oldest first, read from the custody chain'),
    pod_requirements: PodRequirements.nullable()
      .optional()
      .describe('The proofs `deliver` needs, fixed by the dispatch; null before it, or when none'),
    custody: z.array(CustodyEvent),
    created_at: z.string(),
    updated_at: z.string(),
    prescription: z
      .object({
        patient_id: z.string(),
        items: z.array(z.object({ description: z.string(), ndc: z.string().optional(), quantity: z.number().int() })),
        deliver_by: z.string().nullable(),
        external_ref: z.string().nullable(),
      })
      .optional()
      .describe("Lists with `expand=prescription` only: the prescription's patient reference, items and deliver_by"),
    driver: z
      .object({ id: z.string(), name: z.string().nullable() })
      .nullable()
      .optional()
      .describe('Lists with `expand=driver` only: the assigned driver by name; null while none is'),
    last_position: z
      .object({
        lat: z.number(),
        lng: z.number(),
        accuracy_m: z.number(),
        at: z.string().describe('When the fix was taken (RFC 3339 UTC)'),
        distance_m: z.number().int().nullable().describe('Straight-line metres to the delivery address; null when it has no coordinates'),
      })
      .nullable()
      .optional()
      .describe(
        'Lists with `expand=last_position` only: where the driver was last seen (the newest of `GET /v1/deliveries/{id}/locations`) while the delivery is DISPATCHED or PICKED_UP; null otherwise, or before any position',
      ),
  })
  .openapi('Delivery')

const bodies = {
  dispatch: z.strictObject({
    fleet_id: z.string(),
    driver_id: z.string().optional(),
    tote_id: z.string().optional().describe('Required when the delivery needs a cold chain'),
    ...when,
  }),
  pickup: z.strictObject({ from: party, to: party, signature, ...when }),
  handoff: z.strictObject({ from: party, to: party, signature, ...when }),
  return: z.strictObject({ from: party, to: party, signature, ...when }),
  deliver: z.strictObject({
    verification: z.strictObject({ method: z.enum(['otp', 'id_check', 'signature']), evidence: z.string().min(1).max(200_000) }),
    proof: Proof.optional().describe('Required when the delivery’s pod_requirements name proofs (docs/api.md, Proof of delivery)'),
    ...when,
  }),
  fail: z.strictObject({
    reason: z
      .enum(failureReasons, { error: `must be one of ${failureReasons.join(', ')} (a free-text reason goes in \`note\` with \`other\`)` })
      .describe('Why the attempt failed'),
    note: z.string().trim().min(1).max(1_000).optional().describe('What happened, in the driver’s words'),
    ...when,
  }),
  reattempt: z.strictObject({
    driver_id: z.string().optional().describe("Another driver of the delivery's fleet for this attempt; the same one when absent"),
    ...when,
  }),
  cancel: z.strictObject({ reason: z.string().min(1).max(1_000), ...when }),
  disposition: z.strictObject({
    decision: z.enum(['release', 'return']),
    note: z.string().trim().min(1, 'a decision needs a note saying why').max(2_000).describe('Why: required, and kept with the decision'),
    signature: SignatureInput.describe('Required: a disposition is signed by the deciding pharmacist (docs/part11.md)'),
    ...when,
  }),
} as const

const scopes: Record<keyof typeof bodies, string> = {
  dispatch: 'deliveries:write',
  cancel: 'deliveries:write',
  fail: 'custody:write',
  reattempt: 'deliveries:write',
  pickup: 'custody:write',
  handoff: 'custody:write',
  return: 'custody:write',
  deliver: 'custody:write',
  disposition: 'cold-chain:disposition',
}

const summaries: Record<keyof typeof bodies, string> = {
  dispatch: 'Assign a fleet, driver and tote (binds the tote)',
  pickup: 'Driver signs for the goods at the pharmacy',
  handoff: 'One driver hands the goods to another',
  deliver: 'Patient verified; delivery complete',
  fail: 'Delivery attempt failed, with a coded reason',
  reattempt: "Send the same tote out again, up to the pharmacy's max_attempts",
  return: 'Goods handed back to the pharmacy',
  cancel: 'Cancel before pickup',
  disposition: "Pharmacist's decision on a broken cold chain",
}

const operationIds: Record<keyof typeof bodies, string> = {
  dispatch: 'dispatchDelivery',
  pickup: 'pickUpDelivery',
  handoff: 'handOffDelivery',
  deliver: 'completeDelivery',
  fail: 'failDelivery',
  reattempt: 'reattemptDelivery',
  return: 'returnDelivery',
  cancel: 'cancelDelivery',
  disposition: 'decideDisposition',
}

const Verdict = z
  .object({
    valid: z.boolean(),
    length: z.number().int(),
    head: z.string().optional(),
    first_bad_seq: z.number().int().optional(),
    reason: z.string().optional(),
  })
  .openapi('CustodyVerdict')

const Parties = z
  .object({ data: z.array(z.object({ id: z.string(), kind: z.enum(['user', 'driver', 'pharmacy']), name: z.string() })) })
  .openapi('CustodyParties')

/** `POST /v1/deliveries/{id}/<action>`. Registered once per action below, so each handler sees its own body's type. */
const actionRoute = <S extends z.ZodType>(action: keyof typeof bodies, body: S) =>
  v1Route(scopes[action], {
    method: 'post',
    path: `/v1/deliveries/{id}/${action}`,
    operationId: operationIds[action],
    tags: ['Deliveries'],
    summary: summaries[action],
    request: { params: idParam('dl'), ...jsonBody(body) },
    responses: {
      200: json(Delivery, 'The updated delivery'),
      409: problem(
        '`invalid_transition` (with `allowed_actions`; a reattempt past the pharmacy’s max_attempts allows only `return`), `cold_chain_hold`, `sensor_calibration_due` (dispatch: the tote is past its calibration), `pin_locked` (deliver: 5 wrong PINs), or `idempotency_in_progress`',
      ),
      ...(action === 'deliver'
        ? {
            422: problem(
              '`pod_requirements_unmet`: `unmet` lists each required proof missing or not holding (`proof`, `pointer`, `message`), `missing` their kinds; `pin_tries_left` after a wrong PIN. Or `validation_failed`',
            ),
          }
        : {}),
      ...(action === 'disposition'
        ? {
            401: problem(
              '`signature_failed` (wrong password: nothing changed), `insufficient_user_authentication` (no password and a sign-in older than 300 s: `WWW-Authenticate: Bearer error="insufficient_user_authentication", max_age=300`, RFC 9470), or `unauthorized`',
            ),
            403: problem('`signature_required_person` (a machine client cannot sign) or `insufficient_scope`'),
          }
        : {}),
    },
  })

export function deliveryRoutes(deliveries: DeliveryService, signatures: SignatureAuthority) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}',
      operationId: 'getDelivery',
      tags: ['Deliveries'],
      summary: 'Read a delivery with its custody chain and cold-chain status',
      request: { params: idParam('dl') },
      responses: { 200: json(Delivery, 'The delivery') },
    }),
    async (c) => c.json(await deliveries.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries',
      operationId: 'listDeliveries',
      tags: ['Deliveries'],
      summary: 'List deliveries',
      description:
        '`order=attention` lists what needs a pharmacist first: BROKEN cold chains without a disposition, then open EXCURSIONs, then the rest, newest first in each group.',
      request: {
        query: pageQuery.extend({
          status: z.enum(deliveryStatuses).optional(),
          pharmacy_id: z.string().optional(),
          cold_chain_state: z.enum(coldChainStates).optional().describe("The cold chain's state"),
          created_from: z.iso.datetime({ offset: false }).optional().describe('Created at or after (RFC 3339 UTC)'),
          created_to: z.iso.datetime({ offset: false }).optional().describe('Created before (RFC 3339 UTC)'),
          order: z.enum(['id', 'attention']).default('id').describe('`id` (oldest first) or `attention` (the pharmacist queue)'),
          expand: z
            .string()
            .regex(
              new RegExp(`^(${deliveryExpansions.join('|')})(,(${deliveryExpansions.join('|')}))*$`),
              `must be a comma-separated list of ${deliveryExpansions.join(', ')}`,
            )
            .optional()
            .describe(
              "Comma-separated: `prescription` adds each delivery's patient reference, items and deliver_by (needs `prescriptions:read`), `driver` its driver's name, `last_position` where the driver of a delivery in progress was last seen. One query per expansion for the page.",
            ),
        }),
      },
      responses: { 200: json(pageOf(Delivery), 'A page of deliveries') },
    }),
    async (c) => {
      const { limit, cursor, expand, ...filter } = c.req.valid('query')
      const expansions = expand ? ([...new Set(expand.split(','))] as DeliveryExpansion[]) : []
      return c.json(await deliveries.list(c.get('principal'), filter, { limit, cursor }, expansions), 200)
    },
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/custody/verify',
      operationId: 'verifyCustodyChain',
      tags: ['Deliveries'],
      summary: 'Recompute the custody hash chain',
      request: { params: idParam('dl') },
      responses: { 200: json(Verdict, 'Whether every link holds, or the first bad seq') },
    }),
    async (c) => c.json(await deliveries.verifyCustody(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/deliveries/{id}/parties',
      operationId: 'listCustodyParties',
      tags: ['Deliveries'],
      summary: "Names of the people and places the delivery's custody chain names",
      request: { params: idParam('dl') },
      responses: { 200: json(Parties, 'One entry per us_, dr_ and ph_ id in the chain') },
    }),
    async (c) => c.json(await deliveries.parties(c.get('principal'), c.req.valid('param').id), 200),
  )

  const act = (c: Context<AppEnv, '/v1/deliveries/:id'>, input: ActionInput) =>
    deliveries.act(c.get('principal'), c.req.param('id'), input, answerInTransaction(c, 200))
  app.openapi(actionRoute('dispatch', bodies.dispatch), async (c) =>
    c.json(await act(c, { action: 'dispatch', ...c.req.valid('json') }), 200),
  )
  app.openapi(actionRoute('pickup', bodies.pickup), async (c) => c.json(await act(c, { action: 'pickup', ...c.req.valid('json') }), 200))
  app.openapi(actionRoute('handoff', bodies.handoff), async (c) => c.json(await act(c, { action: 'handoff', ...c.req.valid('json') }), 200))
  app.openapi(actionRoute('return', bodies.return), async (c) => c.json(await act(c, { action: 'return', ...c.req.valid('json') }), 200))
  app.openapi(actionRoute('deliver', bodies.deliver), async (c) => c.json(await act(c, { action: 'deliver', ...c.req.valid('json') }), 200))
  app.openapi(actionRoute('fail', bodies.fail), async (c) => c.json(await act(c, { action: 'fail', ...c.req.valid('json') }), 200))
  app.openapi(actionRoute('reattempt', bodies.reattempt), async (c) =>
    c.json(await act(c, { action: 'reattempt', ...c.req.valid('json') }), 200),
  )
  app.openapi(actionRoute('cancel', bodies.cancel), async (c) => c.json(await act(c, { action: 'cancel', ...c.req.valid('json') }), 200))
  // Signed: the person is checked (and the password dropped) before the decision is applied; a
  // delivery the caller may not see is 404 first, so no password is tried (or throttled) for it.
  app.openapi(actionRoute('disposition', bodies.disposition), async (c) => {
    const { signature, ...body } = c.req.valid('json')
    await deliveries.get(c.get('principal'), c.req.valid('param').id)
    const signer = await signatures.authenticate(c.get('principal'), signature, dispositionMeaning[body.decision])
    return c.json(await act(c, { action: 'disposition', ...body, signer }), 200)
  })
  return app
}
