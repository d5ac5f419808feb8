import { OpenAPIHono } from '@hono/zod-openapi'
import { eventTypes } from '../../events/fanout.js'
import { signatureSchemes, type WebhookService } from '../../services/webhook-endpoints.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'

const EventName = z.enum([...eventTypes, '*'])
const SignatureScheme = z
  .enum(signatureSchemes)
  .describe(
    'v1 (the default): HMAC-SHA256 with the endpoint secret; v1a: Ed25519 with the service keys published at /.well-known/webhook-keys.json, so no shared secret is needed (docs/interop.md)',
  )
const NewEndpoint = z
  .strictObject({
    url: z.url().max(2_048).describe('https only (http and private targets only with WEBHOOK_ALLOW_PRIVATE=true)'),
    events: z.array(EventName).min(1).describe('Event names, or ["*"] for all'),
    description: z.string().max(500).optional(),
    pharmacy_id: z.string().optional().describe('Admin tokens only: listen to one pharmacy'),
    fleet_id: z.string().optional().describe('Admin tokens only: listen to one fleet'),
    signature_scheme: SignatureScheme.optional(),
  })
  .openapi('NewWebhookEndpoint')
const Endpoint = z
  .object({
    id: z.string(),
    url: z.string(),
    events: z.array(z.string()),
    description: z.string().nullable(),
    enabled: z.boolean(),
    disabled_reason: z.string().nullable(),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable(),
    signature_scheme: SignatureScheme,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .openapi('WebhookEndpoint')
const Patch = z
  .strictObject({
    url: z.url().max(2_048).optional(),
    events: z.array(EventName).min(1).optional(),
    enabled: z.boolean().optional(),
    description: z.string().max(500).optional(),
    signature_scheme: SignatureScheme.optional(),
  })
  .openapi('WebhookEndpointPatch')
const Attempt = z
  .object({
    id: z.string(),
    event_id: z.string(),
    attempt: z.number().int(),
    at: z.string(),
    status_code: z.number().int().nullable(),
    error: z.string().nullable(),
    duration_ms: z.number().int(),
    success: z.boolean(),
  })
  .openapi('WebhookAttempt')

export function webhookRoutes(webhooks: WebhookService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('webhooks:write', {
      method: 'post',
      path: '/v1/webhooks',
      operationId: 'createWebhook',
      tags: ['Webhooks'],
      summary: 'Register an endpoint; its secret is shown once',
      request: jsonBody(NewEndpoint),
      responses: {
        201: json(
          Endpoint.extend({
            secret: z
              .string()
              .nullable()
              .describe('whsec_…, shown once; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted'),
          }),
          'The endpoint and its signing secret',
        ),
      },
    }),
    async (c) => c.json(await webhooks.create(c.get('principal'), c.req.valid('json'), answerInTransaction(c, 201, ['/secret'])), 201),
  )

  app.openapi(
    v1Route('webhooks:read', {
      method: 'get',
      path: '/v1/webhooks',
      operationId: 'listWebhooks',
      tags: ['Webhooks'],
      summary: 'List endpoints',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(Endpoint), 'A page of endpoints') },
    }),
    async (c) => c.json(await webhooks.list(c.get('principal'), c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('webhooks:read', {
      method: 'get',
      path: '/v1/webhooks/{id}',
      operationId: 'getWebhook',
      tags: ['Webhooks'],
      summary: 'Read an endpoint (never its secret)',
      request: { params: idParam('wh') },
      responses: { 200: json(Endpoint, 'The endpoint') },
    }),
    async (c) => c.json(await webhooks.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('webhooks:write', {
      method: 'patch',
      path: '/v1/webhooks/{id}',
      operationId: 'updateWebhook',
      tags: ['Webhooks'],
      summary: 'Change url, events, description or enabled',
      request: { params: idParam('wh'), ...jsonBody(Patch) },
      responses: { 200: json(Endpoint, 'The endpoint') },
    }),
    async (c) => c.json(await webhooks.update(c.get('principal'), c.req.valid('param').id, c.req.valid('json')), 200),
  )

  app.openapi(
    v1Route('webhooks:write', {
      method: 'delete',
      path: '/v1/webhooks/{id}',
      operationId: 'deleteWebhook',
      tags: ['Webhooks'],
      summary: 'Delete an endpoint and its pending deliveries',
      request: { params: idParam('wh') },
      responses: { 204: { description: 'Deleted' } },
    }),
    async (c) => {
      await webhooks.remove(c.get('principal'), c.req.valid('param').id)
      return c.body(null, 204)
    },
  )

  app.openapi(
    v1Route('webhooks:write', {
      method: 'post',
      path: '/v1/webhooks/{id}/rotate-secret',
      operationId: 'rotateWebhookSecret',
      tags: ['Webhooks'],
      summary: 'New secret; the old one signs alongside for 24 h',
      request: { params: idParam('wh') },
      responses: {
        200: json(
          z.object({
            secret: z
              .string()
              .nullable()
              .describe('Shown once; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted'),
            previous_secret_expires_at: z.string(),
          }),
          'The new secret, shown once',
        ),
      },
    }),
    async (c) =>
      c.json(await webhooks.rotateSecret(c.get('principal'), c.req.valid('param').id, answerInTransaction(c, 200, ['/secret'])), 200),
  )

  app.openapi(
    v1Route('webhooks:read', {
      method: 'get',
      path: '/v1/webhooks/{id}/attempts',
      operationId: 'listWebhookAttempts',
      tags: ['Webhooks'],
      summary: 'Every delivery attempt to this endpoint, oldest first',
      request: { params: idParam('wh'), query: pageQuery },
      responses: { 200: json(pageOf(Attempt), 'A page of attempts') },
    }),
    async (c) => c.json(await webhooks.attempts(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('webhooks:write', {
      method: 'post',
      path: '/v1/events/{id}/redeliver',
      operationId: 'redeliverEvent',
      tags: ['Webhooks'],
      summary: 'Send an event again to your subscribed endpoints',
      request: {
        params: idParam('evt'),
        body: { content: { 'application/json': { schema: z.strictObject({ endpoint_id: z.string().optional() }) } }, required: false },
      },
      responses: { 202: json(z.object({ event_id: z.string(), endpoint_ids: z.array(z.string()) }), 'Queued for delivery') },
    }),
    async (c) => {
      const body = (c.req.valid('json') ?? {}) as { endpoint_id?: string }
      return c.json(
        await webhooks.redeliver(c.get('principal'), c.req.valid('param').id, body.endpoint_id, answerInTransaction(c, 202)),
        202,
      )
    },
  )
  return app
}
