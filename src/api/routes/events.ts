import { OpenAPIHono } from '@hono/zod-openapi'
import type { EventService } from '../../services/events.js'
import type { AppEnv } from '../env.js'
import { idParam, json, pageOf, pageQuery, problem, v1Route, z } from '../openapi.js'
import { cutOffHook, eventStreamResponse, resumeFrom, sseResponse, typeList } from '../sse.js'

/** The query of a live stream; `Last-Event-ID` (header) takes precedence over `after`. */
export const streamQuery = z.object({
  type: typeList,
  delivery_id: z.string().max(64).optional(),
  after: z.string().max(100).optional().describe('An event id: resume after it (what the `Last-Event-ID` header does on reconnecting)'),
})

export const EventEnvelope = z
  .object({
    id: z.string(),
    type: z.string(),
    created_at: z.string(),
    api_version: z.literal('v1'),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable().optional(),
    delivery_id: z.string().nullable().optional(),
    rx_id: z.string().nullable().optional(),
    seq: z.number().int().nullable().describe('Increasing per delivery'),
    data: z.record(z.string(), z.unknown()),
  })
  .openapi('Event')

export function eventRoutes(events: EventService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/events',
      operationId: 'listEvents',
      tags: ['Events'],
      summary: "List the tenant's events in commit order",
      request: {
        query: pageQuery.extend({
          after: z.string().optional().describe('An event id: list what came after it'),
          type: z.string().optional(),
          delivery_id: z.string().optional(),
        }),
      },
      responses: { 200: json(pageOf(EventEnvelope), 'A page of events') },
    }),
    async (c) => c.json(await events.list(c.get('principal'), c.req.valid('query')), 200),
  )

  // Before /v1/events/{id}, which would take `stream` for an id.
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/events/stream',
      operationId: 'streamEvents',
      tags: ['Events'],
      summary: "Follow the tenant's events live (Server-Sent Events)",
      description:
        'The events `GET /v1/events` lists, as they commit: `retry: 2000`, then one frame per event (`id`, `event`, `data` = the event JSON), ' +
        'and a `: heartbeat` comment every 15 s. Reconnect with `Last-Event-ID` (or `?after=`) to resume with no gap and no duplicate; without it the stream starts now. ' +
        'A reader that falls too far behind has its stream closed and resumes the same way.',
      request: { query: streamQuery },
      responses: {
        200: eventStreamResponse('The event stream'),
        429: problem('Too many streams open for this tenant'),
        503: problem('The service is stopping'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query')
      const body = await events.stream(
        c.get('principal'),
        { types: q.type, delivery_id: q.delivery_id, after: resumeFrom(c, q.after) },
        cutOffHook(c),
      )
      return sseResponse(body)
    },
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/events/{id}',
      operationId: 'getEvent',
      tags: ['Events'],
      summary: 'Read an event',
      request: { params: idParam('evt') },
      responses: { 200: json(EventEnvelope, 'The event') },
    }),
    async (c) => c.json(await events.get(c.get('principal'), c.req.valid('param').id), 200),
  )
  return app
}
