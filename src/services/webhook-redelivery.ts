import type { Principal } from '../auth/scopes.js'
import { eventVisible } from './delivery-visibility.js'
import { subscribes } from '../events/fanout.js'
import { notFound, validationFailed } from '../errors.js'
import { newId } from '../ids.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Database, Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'

/** Sends an event again to the caller's subscribed endpoints (or one of them), whatever happened before. */
export async function redeliver(
  deps: ServiceDeps,
  principal: Principal,
  eventId: string,
  endpointId?: string,
  record?: RecordAnswer<{ event_id: string; endpoint_ids: string[] }>,
): Promise<{ event_id: string; endpoint_ids: string[] }> {
  const db = deps.db
  const event = await db.selectFrom('events').selectAll().where('id', '=', eventId).executeTakeFirst()
  if (!event || !(await eventVisible(db, principal, event))) throw notFound('event')
  let query = db.selectFrom('webhook_endpoints').selectAll().where('kind', '=', 'webhook').where('enabled', '=', 1)
  if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
  if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
  if (endpointId) query = query.where('id', '=', endpointId)
  const endpoints = (await query.execute()).filter((e) => subscribes(JSON.parse(e.events), event.type) && reaches(e, event))
  if (endpointId && endpoints.length === 0)
    throw validationFailed([{ pointer: '/endpoint_id', message: 'no enabled endpoint of yours subscribed to this event' }])
  const now = deps.clock.now()
  const queued = { event_id: event.id, endpoint_ids: endpoints.map((e) => e.id) }
  await db.transaction().execute(async (trx) => {
    for (const endpoint of endpoints) await requeue(trx, event.id, endpoint.id, now)
    await record?.(trx, queued)
  })
  deps.outbox.committed(endpoints.length)
  return queued
}

function reaches(endpoint: Database['webhook_endpoints'], event: { pharmacy_id: string | null; fleet_id: string | null }): boolean {
  if (!endpoint.pharmacy_id && !endpoint.fleet_id) return true
  return endpoint.pharmacy_id === event.pharmacy_id || (endpoint.fleet_id !== null && endpoint.fleet_id === event.fleet_id)
}

async function requeue(trx: Executor, eventId: string, endpointId: string, nowMs: number): Promise<void> {
  const existing = await trx
    .selectFrom('webhook_messages')
    .select('id')
    .where('event_id', '=', eventId)
    .where('endpoint_id', '=', endpointId)
    .executeTakeFirst()
  if (existing) {
    await trx
      .updateTable('webhook_messages')
      .set({ state: 'pending', next_attempt_at: nowMs, lease_until: null })
      .where('id', '=', existing.id)
      .execute()
  } else {
    await trx
      .insertInto('webhook_messages')
      .values({
        id: newId('msg'),
        event_id: eventId,
        endpoint_id: endpointId,
        state: 'pending',
        attempts: 0,
        next_attempt_at: nowMs,
        lease_until: null,
        created_at: nowMs,
      })
      .execute()
  }
}
