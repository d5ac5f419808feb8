import { OpenAPIHono } from '@hono/zod-openapi'
import type { EventService } from '../../services/events.js'
import type { AppEnv } from '../env.js'
import { idParam, json, pageOf, pageQuery, problem, v1Route, z } from '../openapi.js'
import { cutOffHook, eventStreamResponse, resumeFrom, sseResponse } from '../sse.js'
import { EventEnvelope, streamQuery } from './events.js'

const description =
  'Cold-chain exceptions (`temperature.excursion`, `cold-chain.break`, `sensor.offline`) and handoff failures ' +
  "(`delivery.failed`, `handoff.refused`) of the deliveries dispatched to the fleet, in commit order. Each type's `data` is cut to a " +
  'fixed list of members: no patient field. Only a token of the fleet or an unrestricted one; a pharmacy token is refused with 403.'

/** A fleet's exception feed (docs/api.md, Exception feed): a page at a time, or live. */
export function fleetExceptionRoutes(events: EventService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/fleets/{id}/exceptions',
      operationId: 'listFleetExceptions',
      tags: ['Fleets'],
      summary: "List a fleet's exceptions",
      description,
      request: {
        params: idParam('fl'),
        query: pageQuery.extend({
          after: z.string().max(100).optional().describe('An event id: list what came after it'),
          type: z.string().optional(),
          delivery_id: z.string().optional(),
        }),
      },
      responses: { 200: json(pageOf(EventEnvelope), 'A page of exceptions') },
    }),
    async (c) => c.json(await events.listExceptions(c.get('principal'), c.req.valid('param').id, c.req.valid('query')), 200),
  )

  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/fleets/{id}/exceptions/stream',
      operationId: 'streamFleetExceptions',
      tags: ['Fleets'],
      summary: "Follow a fleet's exceptions live (Server-Sent Events)",
      description: `${description} Framed and resumed as \`GET /v1/events/stream\`.`,
      request: { params: idParam('fl'), query: streamQuery },
      responses: {
        200: eventStreamResponse('The exception stream'),
        429: problem('Too many streams open for this tenant'),
        503: problem('The service is stopping'),
      },
    }),
    async (c) => {
      const q = c.req.valid('query')
      const body = await events.streamExceptions(
        c.get('principal'),
        c.req.valid('param').id,
        { types: q.type, delivery_id: q.delivery_id, after: resumeFrom(c, q.after) },
        cutOffHook(c),
      )
      return sseResponse(body)
    },
  )
  return app
}
