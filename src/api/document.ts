import type { OpenAPIHono } from '@hono/zod-openapi'
import pkg from '../../package.json' with { type: 'json' }
import { eventTypes } from '../events/fanout.js'
import { addCommonResponses } from './common-responses.js'
import { eventData } from './event-data.js'
import type { AppEnv } from './env.js'
import examples from './openapi-examples.json' with { type: 'json' }
import { z } from './openapi.js'
import { EventEnvelope } from './routes/events.js'

/**
 * Examples are real requests and answers recorded by test/api/openapi-responses.test.ts
 * (`UPDATE_OPENAPI_EXAMPLES=1`), which also checks that each still validates against its schema.
 */
type Recorded = { request?: unknown; response?: { status: string; contentType: string; body?: unknown } }
const recorded = examples as unknown as { operations: Record<string, Recorded>; webhooks: Record<string, unknown> }

type Operation = {
  operationId?: string
  requestBody?: { content: Record<string, { example?: unknown }> }
  responses?: Record<string, { content?: Record<string, { example?: unknown }> }>
}

const pascal = (type: string) =>
  type
    .split(/[.-]/)
    .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
    .join('')

/** Standard Webhooks headers (docs/webhooks: signing); every webhook request carries them. */
const signatureHeaders = z.object({
  'webhook-id': z.string().describe('The event id (`evt_…`); the same on every retry: deduplicate by it'),
  'webhook-timestamp': z.string().describe('Unix seconds when this attempt was signed'),
  'webhook-signature': z
    .string()
    .describe(
      '`v1,<base64 HMAC-SHA256>` (the default), space-separated when two secrets sign during a rotation; for an endpoint whose `signature_scheme` is `v1a`, `v1a,<base64 Ed25519>` under the keys at /.well-known/webhook-keys.json, two during a key rotation',
    ),
})

/** Each event type is a webhook of the document: its body the envelope with that `type` and that type's `data`. */
export function registerWebhooks(app: OpenAPIHono<AppEnv>): void {
  for (const type of eventTypes) {
    app.openAPIRegistry.registerWebhook({
      method: 'post',
      path: type,
      operationId: `on${pascal(type)}`,
      tags: ['Webhooks'],
      summary: `The \`${type}\` event, POSTed to every endpoint subscribed to it`,
      request: {
        headers: signatureHeaders,
        body: {
          required: true,
          content: {
            'application/json': {
              schema: EventEnvelope.extend({ type: z.literal(type), data: eventData[type].openapi(`${pascal(type)}Data`) }),
            },
          },
        },
      },
      responses: {
        200: { description: 'Any 2xx within 10 s acknowledges the event; anything else is retried; `410 Gone` disables the endpoint' },
      },
    })
  }
}

/** The OpenAPI 3.1 document at /v1/openapi.json: generated from the routes' zod schemas, with recorded examples. */
export function buildDocument(app: OpenAPIHono<AppEnv>, issuer: string) {
  addCommonResponses(app.openAPIRegistry)
  const doc = app.getOpenAPI31Document({
    openapi: '3.1.0',
    info: {
      title: 'rxtrace API',
      version: pkg.version,
      description:
        'Prescription delivery with a verifiable chain of custody and live cold-chain monitoring. ' +
        'Every response carries `API-Version: v1`. The TypeScript SDK (`@rxtrace/sdk`) is generated from this document and released with it.',
    },
    servers: [{ url: issuer }],
  })
  for (const item of Object.values(doc.paths ?? {})) {
    for (const op of Object.values(item as Record<string, Operation>))
      attachExamples(op, op.operationId && recorded.operations[op.operationId])
  }
  for (const [type, item] of Object.entries(doc.webhooks ?? {})) {
    const body = (item as { post?: Operation }).post?.requestBody?.content['application/json']
    if (body && recorded.webhooks[type] !== undefined) body.example = recorded.webhooks[type]
  }
  return doc
}

function attachExamples(op: Operation, example: Recorded | undefined | '') {
  if (!example) return
  const request = op.requestBody && Object.values(op.requestBody.content)[0]
  if (request && example.request !== undefined) request.example = example.request
  const response = example.response && op.responses?.[example.response.status]?.content?.[example.response.contentType]
  if (response && example.response!.body !== undefined) response.example = example.response!.body
}
