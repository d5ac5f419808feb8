import { OpenAPIHono } from '@hono/zod-openapi'
import type { ToteService } from '../../services/totes.js'
import type { AppEnv } from '../env.js'
import { answerInTransaction } from '../middleware/idempotency.js'
import { idParam, json, jsonBody, pageOf, pageQuery, v1Route, z } from '../openapi.js'

const NewTote = z
  .strictObject({
    serial: z
      .string()
      .min(1)
      .max(100)
      .regex(/^[\w.-]+$/, 'letters, digits, dot, dash and underscore only'),
    pharmacy_id: z.string().optional(),
    fleet_id: z.string().optional(),
  })
  .openapi('NewTote')
const Tote = z
  .object({
    id: z.string(),
    serial: z.string(),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable(),
    created_at: z.string(),
  })
  .openapi('Tote')
const ToteWithCredentials = Tote.extend({
  mqtt: z.object({
    username: z.string(),
    password: z
      .string()
      .nullable()
      .describe('Shown once, stored hashed; null in an Idempotency-Key replay, which names it in Idempotent-Replay-Redacted'),
    client_id: z.string(),
    readings_topic: z.string(),
    errors_topic: z.string(),
  }),
}).openapi('ToteWithCredentials')

export function toteRoutes(totes: ToteService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('totes:write', {
      method: 'post',
      path: '/v1/totes',
      operationId: 'createTote',
      tags: ['Totes'],
      summary: 'Register a tote and get its MQTT credentials',
      request: jsonBody(NewTote),
      responses: { 201: json(ToteWithCredentials, 'The tote; the password is shown only now') },
    }),
    async (c) =>
      c.json(await totes.register(c.get('principal'), c.req.valid('json'), answerInTransaction(c, 201, ['/mqtt/password'])), 201),
  )

  app.openapi(
    v1Route('telemetry:read', {
      method: 'get',
      path: '/v1/totes/{id}',
      operationId: 'getTote',
      tags: ['Totes'],
      summary: 'Read a tote',
      request: { params: idParam('tt') },
      responses: { 200: json(Tote, 'The tote') },
    }),
    async (c) => c.json(await totes.get(c.get('principal'), c.req.valid('param').id), 200),
  )

  app.openapi(
    v1Route('telemetry:read', {
      method: 'get',
      path: '/v1/totes',
      operationId: 'listTotes',
      tags: ['Totes'],
      summary: 'List totes',
      request: { query: pageQuery },
      responses: { 200: json(pageOf(Tote), 'A page of totes') },
    }),
    async (c) => c.json(await totes.list(c.get('principal'), c.req.valid('query')), 200),
  )
  return app
}
