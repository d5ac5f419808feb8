import { OpenAPIHono } from '@hono/zod-openapi'
import type { Clock } from '../../clock.js'
import { notFound } from '../../errors.js'
import type { ToteService } from '../../services/totes.js'
import type { ReadingSink } from '../../timeseries/sink.js'
import { recentReadings } from '../../timeseries/tote-readings.js'
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
const instant = z.iso.datetime({ offset: true }).describe('RFC 3339')
const Sensor = z
  .strictObject({
    serial: z.string().min(1).max(100).describe("The sensor's own serial number"),
    model: z.string().min(1).max(100),
    accuracy_c: z.number().positive().max(10).describe('± °C, from the calibration certificate'),
    calibrated_at: instant,
    calibration_due: instant.describe(
      'From this instant a cold-chain dispatch with the tote is refused or warned of (the pharmacy’s calibration_policy)',
    ),
    certificate_ref: z.string().min(1).max(200).describe('The ISO/IEC 17025 calibration certificate’s reference'),
  })
  .openapi('ToteSensor')
const Tote = z
  .object({
    id: z.string(),
    serial: z.string(),
    pharmacy_id: z.string().nullable(),
    fleet_id: z.string().nullable(),
    created_at: z.string(),
    sensor: Sensor.nullable().describe('The temperature sensor and its calibration; null until recorded'),
  })
  .openapi('Tote')
const ToteChanges = z.strictObject({ sensor: Sensor }).openapi('ToteChanges')
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

const ToteReading = z
  .object({
    ts: z.string().describe('Event time (the sensor clock)'),
    temp_c: z.number(),
    battery: z.number().nullable(),
    humidity: z.number().nullable(),
    seq: z.number().nullable(),
    received_at: z.string(),
    late: z.boolean().describe('Arrived after the rule engine had evaluated past its ts'),
    delivery_id: z.string().nullable().describe('The delivery the tote was dispatched with at ts; null when it was on none'),
    rx_id: z.string().nullable(),
  })
  .openapi('ToteReading')

export function toteRoutes(totes: ToteService, sink: ReadingSink, clock: Clock) {
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
    v1Route('totes:write', {
      method: 'patch',
      path: '/v1/totes/{id}',
      operationId: 'updateTote',
      tags: ['Totes'],
      summary: "Record a tote's sensor and its calibration",
      description: 'Replaces the sensor record as a whole; the audit log keeps who changed it and when.',
      request: { params: idParam('tt'), ...jsonBody(ToteChanges) },
      responses: { 200: json(Tote, 'The tote as changed') },
    }),
    async (c) => c.json(await totes.updateSensor(c.get('principal'), c.req.valid('param').id, c.req.valid('json').sensor), 200),
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

  app.openapi(
    v1Route('telemetry:read', {
      method: 'get',
      path: '/v1/totes/{id}/readings',
      operationId: 'listToteReadings',
      tags: ['Totes'],
      summary: "A tote's recent readings, newest first, each with the delivery it went to",
      description:
        'Where a reading went: each carries the delivery the tote was dispatched with at its ts, or null. A driver reads temperatures through their delivery instead (404 here).',
      request: { params: idParam('tt'), query: pageQuery },
      responses: { 200: json(pageOf(ToteReading), 'A page of readings, newest first') },
    }),
    async (c) => {
      const principal = c.get('principal')
      const { id } = c.req.valid('param')
      await totes.get(principal, id) // the tenant walls of GET /v1/totes/{id}
      // A driver's readings are their deliveries' traces; a tote's other trips are not theirs to see.
      if (principal.driverId) throw notFound('tote')
      return c.json(await recentReadings(sink, id, c.req.valid('query'), clock.now()), 200)
    },
  )
  return app
}
