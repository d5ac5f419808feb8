import { OpenAPIHono } from '@hono/zod-openapi'
import { AppError } from '../../errors.js'
import { DEFAULT_OVERLAP_S, type WebhookKeyRing } from '../../webhooks/signing-keys.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { json, publicRoute, v1Route, z } from '../openapi.js'

const WebhookKey = z
  .object({
    kty: z.literal('OKP'),
    crv: z.literal('Ed25519'),
    x: z.string().describe('The public key, base64url (RFC 8037 §2)'),
    kid: z.string(),
    alg: z.literal('EdDSA'),
    use: z.literal('sig'),
  })
  .openapi('WebhookPublicKey')

/** The service's Ed25519 webhook keys (`v1a`): published for subscribers, rotated by an admin. */
export function webhookKeyRoutes(keys: WebhookKeyRing) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    publicRoute({
      method: 'get',
      path: '/.well-known/webhook-keys.json',
      operationId: 'getWebhookKeys',
      tags: ['Webhooks'],
      summary: 'Public keys that sign v1a webhooks (Ed25519, JWKS-like)',
      description:
        'Every key that signs now or will soon, and during a rotation the previous one until its overlap ends. A `v1a` request verifies when any of its `v1a,` signatures verifies under any key here.',
      responses: { 200: json(z.object({ keys: z.array(WebhookKey) }), 'The key set') },
    }),
    async (c) => {
      // As the JWKS: a subscriber re-reading it every 5 minutes sees a new key before the old one retires.
      c.header('Cache-Control', 'public, max-age=300')
      return c.json(await keys.keySet(), 200)
    },
  )

  app.openapi(
    v1Route('webhooks:write', {
      method: 'post',
      path: '/v1/webhook-signing-keys/rotate',
      operationId: 'rotateWebhookSigningKey',
      tags: ['Webhooks'],
      summary: 'Rotate the Ed25519 key that signs v1a webhooks',
      description:
        'The new key is published at once and signs after `publish_ahead_s`; the previous key keeps signing beside it for `overlap_s` (default 24 h), then leaves the key set.',
      request: {
        body: {
          content: {
            'application/json': {
              schema: z.strictObject({
                publish_ahead_s: z.number().int().min(0).max(86_400).default(0),
                overlap_s: z.number().int().min(0).max(604_800).default(DEFAULT_OVERLAP_S),
              }),
            },
          },
          required: false,
        },
      },
      responses: { 200: json(z.object({ kid: z.string(), activates_at: z.string(), previous_retires_at: z.string() }), 'The new key id') },
    }),
    async (c) => {
      const principal = c.get('principal')
      if (principal.pharmacyId || principal.fleetId)
        throw new AppError('insufficient_scope', 'Only an unrestricted client rotates webhook signing keys.')
      const body = (c.req.valid('json') ?? {}) as { publish_ahead_s?: number; overlap_s?: number }
      return c.json(await keys.rotate(body.publish_ahead_s ?? 0, body.overlap_s ?? DEFAULT_OVERLAP_S, answerInTransaction(c, 200)), 200)
    },
  )
  return app
}
