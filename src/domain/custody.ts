import { jcsHash } from '../hashing.js'
import type { CustodyEvent } from './custody-event.js'
import { signatureFault } from './e-signature.js'

export type { CustodyAttempt, CustodyEvent, CustodyType, FailureReason, HandoffTemperature, StoredSignature } from './custody-event.js'

export type PrescriptionFacts = {
  rx_id: string
  pharmacy_id: string
  patient_id: string
  cold_chain: boolean
  temperature_profile: unknown
  created_at: string
}

/** audit_hash = sha256 over the JCS form of exactly these six members (docs/api.md, Verify it yourself). */
export function auditHashOf(rx: PrescriptionFacts): string {
  const { rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at } = rx
  return jcsHash({ rx_id, pharmacy_id, patient_id, cold_chain, temperature_profile, created_at })
}

/** Links the next event to the chain: its prev_hash is the head, its hash covers all it says. */
export function chainEvent(head: string, event: Omit<CustodyEvent, 'prev_hash' | 'hash'>): CustodyEvent {
  const unsigned = { ...event, prev_hash: head }
  return { ...unsigned, hash: jcsHash(unsigned) }
}

export type ChainVerdict =
  { valid: true; length: number; head: string } | { valid: false; length: number; first_bad_seq: number; reason: string }

/**
 * Recomputes every link from the audit hash; the first event that does not add up is reported by
 * the seq it should carry (its position), so an edited or missing seq is reported where it breaks.
 * With the delivery's id, each e-signature must also bind to the event it signs (e-signature.ts).
 */
export function verifyChain(auditHash: string, events: CustodyEvent[], deliveryId?: string): ChainVerdict {
  let head = auditHash
  for (const [index, event] of events.entries()) {
    const expectedSeq = index + 1
    const { hash, ...unsigned } = event
    const fail = (reason: string): ChainVerdict => ({ valid: false, length: events.length, first_bad_seq: expectedSeq, reason })
    if (event.seq !== expectedSeq) return fail(`expected seq ${expectedSeq}`)
    if (event.prev_hash !== head) return fail('prev_hash does not match the previous event')
    if (jcsHash(unsigned) !== hash) return fail('hash does not match the event')
    const signature = signatureFault(deliveryId, events, index)
    if (signature) return fail(signature)
    head = hash
  }
  return { valid: true, length: events.length, head }
}
