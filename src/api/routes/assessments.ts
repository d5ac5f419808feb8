import { OpenAPIHono } from '@hono/zod-openapi'
import type { SignatureAuthority } from '../../auth/e-signatures.js'
import { storedSignatureSchema } from '../../domain/e-signature.js'
import type { AssessmentService } from '../../services/assessments.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, problem, v1Route, z } from '../openapi.js'
import { SignatureInput } from './deliveries.js'

// Ten years in seconds, as a band's allowance: beyond is a typo.
const MAX_ADD_BACK_S = 315_360_000

const NewAssessment = z
  .strictObject({
    ndc: z.string().max(20).describe("The item's NDC (any accepted shape; matched in its 5-4-2 form)"),
    band: z.number().int().min(0).max(5).describe("Index of the band in the item's product stability version, from 0"),
    add_back_s: z.number().int().min(1).max(MAX_ADD_BACK_S).describe('Seconds of budget given back to that band'),
    justification: z
      .string()
      .trim()
      .min(1, 'an assessment needs a justification')
      .max(2_000)
      .describe('The evidence: stability study, manufacturer statement, QA reasoning'),
    signature: SignatureInput.describe('Required: the pharmacist signs the assessment, meaning `assessed` (docs/part11.md)'),
  })
  .openapi('NewAssessment', {
    example: {
      ndc: '00002-8215-01',
      band: 0,
      add_back_s: 1800,
      justification: 'Manufacturer letter 2026-11-02: 30 min more at ≤ 25 °C',
      signature: { meaning: 'assessed', password: 'the pharmacist’s password' },
    },
  })

const Withdrawal = z
  .strictObject({
    signature: SignatureInput.describe('Required: the withdrawal is signed too, meaning `assessed` (docs/part11.md)'),
  })
  .openapi('AssessmentWithdrawal', { example: { signature: { meaning: 'assessed', password: 'the pharmacist’s password' } } })

const Signature = storedSignatureSchema

const Party = z.object({ client_id: z.string(), sub: z.string() })
const Assessment = z
  .object({
    id: z.string(),
    delivery_id: z.string(),
    ndc: z.string(),
    band: z.number().int(),
    add_back_s: z.number().int(),
    justification: z.string(),
    assessed_by: Party,
    created_at: z.string(),
    withdrawn_by: Party.nullable(),
    withdrawn_at: z.string().nullable(),
    signature: Signature.nullable().describe(
      "The pharmacist's e-signature, meaning `assessed`, bound through its custody event to this content; null only on assessments made before signing",
    ),
    withdrawal_signature: Signature.nullable().describe('The e-signature of the withdrawal (meaning `assessed`), once withdrawn'),
    signature_verified: z
      .boolean()
      .describe('The signature is the one the custody chain holds for exactly this content (recomputed on every read)'),
  })
  .openapi('Assessment')

const assessmentParams = idParam('dl').extend({
  assessment_id: z
    .string()
    .min(3)
    .max(64)
    .openapi({ param: { name: 'assessment_id', in: 'path' }, example: 'as_01jd0000000000000000000000' }),
})

/** Excursion assessments (docs/stability.md): a pharmacist gives budget back, and may withdraw it. */
const signingAnswers = {
  401: problem(
    '`signature_failed` (wrong password: nothing changed), `insufficient_user_authentication` (no password and a sign-in older than 300 s: `WWW-Authenticate: Bearer error="insufficient_user_authentication", max_age=300`, RFC 9470), or `unauthorized`',
  ),
  403: problem('`signature_required_person` (a machine client cannot sign) or `insufficient_scope`'),
}

// Signed like a disposition: a delivery the caller may not see is 404 before any password is
// tried (or throttled); then the person is checked and the password dropped, then the change applied.
export function assessmentRoutes(assessments: AssessmentService, signatures: SignatureAuthority) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('cold-chain:disposition', {
      method: 'post',
      path: '/v1/deliveries/{id}/assessments',
      operationId: 'assessExcursion',
      tags: ['Deliveries'],
      summary: "Give stability budget back to one band of an item (a pharmacist's excursion assessment)",
      description:
        'Signed by a pharmacist (`signature: {meaning: "assessed", password}`; a machine client is 403 `signature_required_person`, a wrong password 401 `signature_failed` and nothing changes). The assessment and its signature enter the custody chain as an `assessed` event and a `signed` event. The ledger is recomputed with it at once; a break already announced stands. Only the prescription\'s latest leg (409 `conflict` otherwise). Accepts `Idempotency-Key`.',
      request: { params: idParam('dl'), ...jsonBody(NewAssessment) },
      responses: {
        201: json(Assessment, 'Given back; the delivery’s ledger shows it'),
        409: problem('`conflict`: the delivery was redelivered (assess the latest leg), or `idempotency_in_progress`'),
        ...signingAnswers,
      },
    }),
    async (c) => {
      const principal = c.get('principal')
      const { id } = c.req.valid('param')
      const { signature, ...input } = c.req.valid('json')
      await assessments.check(principal, id)
      const signer = await signatures.authenticate(principal, signature, 'assessed')
      return c.json(await assessments.create(principal, id, input, signer, answerInTransaction(c, 201)), 201)
    },
  )

  app.openapi(
    v1Route('cold-chain:disposition', {
      method: 'delete',
      path: '/v1/deliveries/{id}/assessments/{assessment_id}',
      operationId: 'withdrawAssessment',
      tags: ['Deliveries'],
      summary: 'Withdraw an excursion assessment: its budget is taken back',
      description:
        'Signed like the assessment: the DELETE carries the JSON body `{signature: {meaning: "assessed", password}}` (the API reads a DELETE body as any other). The assessment is kept, stamped `withdrawn_at` with `withdrawal_signature`, and the withdrawal enters the custody chain as an `assessment_withdrawn` event and its `signed` event; withdrawing it again answers the first withdrawal. Only on the latest leg.',
      request: { params: assessmentParams, ...jsonBody(Withdrawal) },
      responses: {
        200: json(Assessment, 'Withdrawn'),
        409: problem('`conflict`: the delivery was redelivered, or withdrawn meanwhile by another request'),
        415: problem('`unsupported_media_type`: the body (the signature) is JSON'),
        ...signingAnswers,
      },
    }),
    async (c) => {
      const principal = c.get('principal')
      const { id, assessment_id } = c.req.valid('param')
      await assessments.check(principal, id)
      const signer = await signatures.authenticate(principal, c.req.valid('json').signature, 'assessed')
      return c.json(await assessments.withdraw(principal, id, assessment_id, signer), 200)
    },
  )
  return app
}
