import { newId } from '../ids.js'
import { insertRows, precompiled } from '../store/precompiled.js'
import type { Executor } from '../store/schema.js'

/** Lifecycle, custody, exception and writeback events a webhook may subscribe to (or `*`). */
export const eventTypes = [
  'delivery.created',
  'delivery.dispatched',
  'delivery.picked-up',
  'delivery.delivered',
  'delivery.failed',
  'delivery.reattempted',
  'delivery.returned',
  'delivery.cancelled',
  'delivery.eta-changed',
  'delivery.arriving',
  'custody.handoff-signed',
  'custody.patient-verified',
  'temperature.excursion',
  'temperature.recovered',
  'cold-chain.break',
  'cold-chain.disposition',
  'sensor.offline',
  'stability.budget-low',
  'writeback.completed',
  'writeback.failed',
  'handoff.refused',
  'alarm.acknowledged',
  'alarm.escalated',
  'patient.notify',
] as const

export type EventType = (typeof eventTypes)[number]

export const subscribes = (events: readonly string[], type: string) => events.includes('*') || events.includes(type)

/** The enabled endpoints that hear everyone, or the event's pharmacy, or its fleet: one query per combination. */
const endpointQuery = (byPharmacy: boolean, byFleet: boolean) =>
  precompiled((db, pharmacyId: string, fleetId: string) =>
    db
      .selectFrom('webhook_endpoints')
      .select(['id', 'events'])
      .where('enabled', '=', 1)
      .where((eb) =>
        eb.or([
          eb.and([eb('pharmacy_id', 'is', null), eb('fleet_id', 'is', null)]),
          ...(byPharmacy ? [eb('pharmacy_id', '=', pharmacyId)] : []),
          ...(byFleet ? [eb('fleet_id', '=', fleetId)] : []),
        ]),
      ),
  )
const endpointQueries = [endpointQuery(false, false), endpointQuery(true, false), endpointQuery(false, true), endpointQuery(true, true)]

type Routable = { id: string; type: string; pharmacy_id: string | null; fleet_id?: string | null | undefined }

/**
 * Queues one message per subscribed endpoint, inside the transaction that writes the event, so an
 * event and its deliveries commit (or vanish) together. Endpoints registered without a tenant
 * hear every tenant.
 */
export async function enqueueForEndpoints(trx: Executor, event: Routable, nowMs: number): Promise<number> {
  const targets = await targetsOf(trx, event, new Map())
  if (targets.length === 0) return 0
  await trx
    .insertInto('webhook_messages')
    .values(messagesFor(event, targets, nowMs))
    .execute()
  return targets.length
}

/** enqueueForEndpoints for several events: one endpoint read per tenant combination, one insert per 128 messages. */
export async function enqueueManyForEndpoints(trx: Executor, events: readonly Routable[], nowMs: number): Promise<number> {
  const endpointsOf = new Map<string, Endpoint[]>()
  const messages = []
  for (const event of events) messages.push(...messagesFor(event, await targetsOf(trx, event, endpointsOf), nowMs))
  await insertRows(trx, 'webhook_messages', messages)
  return messages.length
}

type Endpoint = { id: string; events: string }

/** The endpoints subscribed to the event; `endpointsOf` keeps the endpoints read per tenant combination. */
async function targetsOf(trx: Executor, event: Routable, endpointsOf: Map<string, Endpoint[]>): Promise<Endpoint[]> {
  const tenant = `${event.pharmacy_id ?? ''}\n${event.fleet_id ?? ''}`
  let endpoints = endpointsOf.get(tenant)
  if (endpoints === undefined) {
    const query = endpointQueries[(event.pharmacy_id ? 1 : 0) + (event.fleet_id ? 2 : 0)]!
    endpointsOf.set(tenant, (endpoints = await query(trx, event.pharmacy_id ?? '', event.fleet_id ?? '')))
  }
  return endpoints.filter((e) => subscribes(JSON.parse(e.events) as string[], event.type))
}

function messagesFor(event: Routable, targets: readonly Endpoint[], nowMs: number) {
  return targets.map((endpoint) => ({
    id: newId('msg'),
    event_id: event.id,
    endpoint_id: endpoint.id,
    state: 'pending' as const,
    attempts: 0,
    next_attempt_at: nowMs,
    lease_until: null,
    created_at: nowMs,
  }))
}
