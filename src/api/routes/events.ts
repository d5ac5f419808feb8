import { OpenAPIHono } from '@hono/zod-openapi'
import type { EventService } from '../../services/events.js'
import type { AppEnv } from '../env.js'
import { idParam, json, pageOf, pageQuery, v1Route, z } from '../openapi.js'

export const EventEnvelope = z.object({
  id: z.string(), type: z.string(), created_at: z.string(), api_version: z.literal('v1'), pharmacy_id: z.string().nullable(),
  fleet_id: z.string().nullable().optional(), delivery_id: z.string().nullable().optional(), rx_id: z.string().nullable().optional(),
  seq: z.number().int().nullable().describe('Increasing per delivery'), data: z.record(z.string(), z.unknown()),
}).openapi('Event')

export function eventRoutes(events: EventService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(v1Route('deliveries:read', {
    method: 'get', path: '/v1/events', operationId: 'listEvents', tags: ['Events'], summary: "List the tenant's events in commit order",
    request: { query: pageQuery.extend({ after: z.string().optional().describe('An event id: list what came after it'), type: z.string().optional(), delivery_id: z.string().optional() }) },
    responses: { 200: json(pageOf(EventEnvelope), 'A page of events') },
  }), async (c) => c.json(await events.list(c.get('principal'), c.req.valid('query')), 200))

  app.openapi(v1Route('deliveries:read', {
    method: 'get', path: '/v1/events/{id}', operationId: 'getEvent', tags: ['Events'], summary: 'Read an event',
    request: { params: idParam('evt') }, responses: { 200: json(EventEnvelope, 'The event') },
  }), async (c) => c.json(await events.get(c.get('principal'), c.req.valid('param').id), 200))
  return app
}
