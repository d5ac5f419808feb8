import type { CustodyEvent } from '../domain/custody.js'
import { fromJson, toJson, type Database } from './schema.js'

/** Custody events between their API shape (which the hashes cover) and their table row. */
export function custodyRow(deliveryId: string, e: CustodyEvent): Database['custody_events'] {
  return {
    delivery_id: deliveryId,
    seq: e.seq,
    type: e.type,
    actor: toJson(e.actor),
    from_party: e.from,
    to_party: e.to,
    location: e.location ? toJson(e.location) : null,
    evidence_hash: e.evidence_hash,
    occurred_at: e.occurred_at,
    recorded_at: e.recorded_at,
    prev_hash: e.prev_hash,
    hash: e.hash,
    signature: e.signature ? toJson(e.signature) : null,
    temperature: e.temperature ? toJson(e.temperature) : null,
    attempt: e.attempt ? toJson(e.attempt) : null,
    evidence: e.evidence ? toJson(e.evidence) : null,
  }
}

export function toCustodyEvent(row: Database['custody_events']): CustodyEvent {
  return {
    seq: row.seq,
    type: row.type as CustodyEvent['type'],
    actor: fromJson(row.actor),
    from: row.from_party,
    to: row.to_party,
    location: fromJson(row.location),
    evidence_hash: row.evidence_hash,
    occurred_at: row.occurred_at,
    recorded_at: row.recorded_at,
    prev_hash: row.prev_hash,
    hash: row.hash,
    // Absent, not null, on unsigned events: their hashes were computed without the member.
    ...(row.signature ? { signature: fromJson<NonNullable<CustodyEvent['signature']>>(row.signature) } : {}),
    // Likewise absent on events recorded before migration 0053, and on events they do not apply to.
    ...(row.temperature ? { temperature: fromJson<NonNullable<CustodyEvent['temperature']>>(row.temperature) } : {}),
    ...(row.attempt ? { attempt: fromJson<NonNullable<CustodyEvent['attempt']>>(row.attempt) } : {}),
    ...(row.evidence ? { evidence: fromJson<NonNullable<CustodyEvent['evidence']>>(row.evidence) } : {}),
  }
}
