import type { EventEnvelope } from './outbox.js'

/**
 * A fleet's exception feed (docs/api.md, Exception feed): the cold-chain exceptions the rule
 * engine raises and the handoff failures of the deliveries dispatched to the fleet.
 *
 * Each type lists the `data` members the feed passes on; every other member is dropped, so a
 * field added to an event later (a patient's name, an address, verification evidence) never
 * reaches the feed until someone adds it here on purpose. The envelope itself is the one
 * GET /v1/events lists: ids, tenant, type, times; no patient field is in it.
 */
export const exceptionDataFields = {
  'temperature.excursion': ['excursion_started_at', 'kind', 'peak_c', 'min_c', 'max_c', 'grace_s'],
  'cold-chain.break': [
    'reason',
    'threshold',
    'limit',
    'broken_at',
    'temp_c',
    'excursion_started_at',
    'excursion_duration_s',
    'time_out_of_range_s',
    'unknown_s',
    'mkt_c',
    'profile',
  ],
  'sensor.offline': ['last_reading_at', 'offline_since', 'back_online_at', 'max_gap_s'],
  'delivery.failed': ['status', 'previous_status', 'action', 'occurred_at', 'reason', 'attempt', 'custody_seq', 'custody_hash'],
  'handoff.refused': ['action', 'code', 'reason', 'errors', 'status', 'from', 'to', 'occurred_at', 'refused_at'],
} as const satisfies Record<string, readonly string[]>

export type ExceptionType = keyof typeof exceptionDataFields

export const exceptionTypes = Object.keys(exceptionDataFields) as ExceptionType[]

export const isExceptionType = (type: string): type is ExceptionType => Object.hasOwn(exceptionDataFields, type)

/** The event as the exception feed shows it: the same envelope, `data` cut to the type's allowlist. */
export function asException(event: EventEnvelope): EventEnvelope {
  const allowed: readonly string[] = isExceptionType(event.type) ? exceptionDataFields[event.type] : []
  const data: Record<string, unknown> = {}
  for (const key of allowed) if (Object.hasOwn(event.data, key)) data[key] = event.data[key]
  return { ...event, data }
}
