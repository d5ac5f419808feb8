import { OpenAPIHono } from '@hono/zod-openapi'
import { alarmKinds, alarmStates } from '../../../rules/index.js'
import type { AlarmService } from '../../services/alarms.js'
import type { AppEnv } from '../env.js'
import { idParam, json, jsonBody, pageOf, pageQuery, problem, v1Route, z } from '../openapi.js'

const time = z.string().describe('RFC 3339 UTC')
const Alarm = z
  .object({
    id: z.string().describe('`al_…`'),
    delivery_id: z.string(),
    pharmacy_id: z.string(),
    fleet_id: z.string().nullable().describe('The fleet the delivery was dispatched to when it was raised'),
    kind: z
      .enum(alarmKinds)
      .describe('excursion: out of range past the grace time; break, sensor_gap, stability: a cold-chain break of that cause'),
    state: z
      .enum(alarmStates)
      .describe(
        'ACTIVE_UNACK → (acknowledge) ACTIVE_ACK → (cleared) CLEARED_ACK; CLEARED_UNACK when it cleared unseen (acknowledge → CLEARED_ACK)',
      ),
    raised_at: time,
    cleared_at: time.nullable().describe('When the rules saw it end (an excursion recovered) or a disposition decided the delivery'),
    acknowledged_by: z.string().nullable().describe('The user (`us_…`) or client who acknowledged it'),
    acknowledged_at: time.nullable(),
    note: z.string().nullable().describe('What the person who acknowledged it wrote'),
    assigned_to: z.string().nullable().describe('The user (`us_…`) looking after it'),
    escalate_at: time.describe('raised + the pharmacy’s escalate_after_s: unacknowledged by then, it is escalated'),
    escalated_at: time.nullable().describe('When alarm.escalated was emitted; null if it was not'),
  })
  .openapi('Alarm')

const AlarmQuery = pageQuery.extend({
  state: z.enum(alarmStates).optional(),
  delivery_id: z.string().max(64).optional(),
})
const Acknowledgement = z
  .strictObject({ note: z.string().trim().min(1).max(2000).describe('What was seen and done') })
  .openapi('AlarmAcknowledgement')
const Assignment = z
  .strictObject({ user: z.string().min(3).max(64).describe('A user (`us_…`) of the pharmacy or of the fleet') })
  .openapi('AlarmAssignment')

export function alarmRoutes(alarms: AlarmService) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/alarms',
      operationId: 'listAlarms',
      tags: ['Alarms'],
      summary: 'List alarms, oldest first',
      description: 'The alarms of the deliveries the caller may see (a driver: the deliveries assigned to them).',
      request: { query: AlarmQuery },
      responses: { 200: json(pageOf(Alarm), 'A page of alarms') },
    }),
    async (c) => {
      const { state, delivery_id, ...page } = c.req.valid('query')
      return c.json(await alarms.list(c.get('principal'), { state, delivery_id }, page), 200)
    },
  )

  app.openapi(
    v1Route('cold-chain:disposition', {
      method: 'post',
      path: '/v1/alarms/{id}/acknowledge',
      operationId: 'acknowledgeAlarm',
      tags: ['Alarms'],
      summary: 'Acknowledge an alarm with a note',
      description: 'Once per alarm: the person, the time and the note are kept and never change. Emits alarm.acknowledged.',
      request: { params: idParam('al'), ...jsonBody(Acknowledgement) },
      responses: {
        200: json(Alarm, 'The alarm, acknowledged'),
        409: problem('`invalid_transition`: already acknowledged (`reason`)'),
      },
    }),
    async (c) => c.json(await alarms.acknowledge(c.get('principal'), c.req.valid('param').id, c.req.valid('json').note), 200),
  )

  app.openapi(
    v1Route('cold-chain:disposition', {
      method: 'post',
      path: '/v1/alarms/{id}/assign',
      operationId: 'assignAlarm',
      tags: ['Alarms'],
      summary: 'Name who looks after an alarm',
      request: { params: idParam('al'), ...jsonBody(Assignment) },
      responses: {
        200: json(Alarm, 'The alarm, assigned'),
        409: problem('`invalid_transition`: the alarm is closed (CLEARED_ACK)'),
      },
    }),
    async (c) => c.json(await alarms.assign(c.get('principal'), c.req.valid('param').id, c.req.valid('json').user), 200),
  )
  return app
}
