import { OpenAPIHono } from '@hono/zod-openapi'
import type { AssessmentService } from '../../services/assessments.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, problem, v1Route, z } from '../openapi.js'

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
  })
  .openapi('NewAssessment', {
    example: { ndc: '00002-8215-01', band: 0, add_back_s: 1800, justification: 'Manufacturer letter 2026-11-02: 30 min more at ≤ 25 °C' },
  })

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
    signature: z.null().describe('The e-signature; null until e-signatures are enabled'),
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
export function assessmentRoutes(assessments: AssessmentService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('cold-chain:disposition', {
      method: 'post',
      path: '/v1/deliveries/{id}/assessments',
      operationId: 'assessExcursion',
      tags: ['Deliveries'],
      summary: "Give stability budget back to one band of an item (a pharmacist's excursion assessment)",
      description:
        "A person's token only (403 `signature_required_person` for a machine client). The ledger is recomputed with it at once; a break already announced stands. Only the prescription's latest leg (409 `conflict` otherwise). Accepts `Idempotency-Key`.",
      request: { params: idParam('dl'), ...jsonBody(NewAssessment) },
      responses: {
        201: json(Assessment, 'Given back; the delivery’s ledger shows it'),
        409: problem('`conflict`: the delivery was redelivered (assess the latest leg), or `idempotency_in_progress`'),
      },
    }),
    async (c) => {
      const created = await assessments.create(
        c.get('principal'),
        c.req.valid('param').id,
        c.req.valid('json'),
        answerInTransaction(c, 201),
      )
      return c.json(created, 201)
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
        'A person’s token only. The assessment is kept, stamped `withdrawn_at`; withdrawing it again answers the same. Only on the latest leg.',
      request: { params: assessmentParams },
      responses: {
        200: json(Assessment, 'Withdrawn'),
        409: problem('`conflict`: the delivery was redelivered'),
      },
    }),
    async (c) => {
      const { id, assessment_id } = c.req.valid('param')
      return c.json(await assessments.withdraw(c.get('principal'), id, assessment_id), 200)
    },
  )
  return app
}
