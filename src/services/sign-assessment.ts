import type { Signer } from '../auth/e-signatures.js'
import type { Principal } from '../auth/scopes.js'
import { chainEvent, type CustodyEvent, type StoredSignature } from '../domain/custody.js'
import { assessmentRecordHash, signatureFault, type AssessmentRecord } from '../domain/e-signature.js'
import { jcsHash } from '../hashing.js'
import type { Executor } from '../store/schema.js'
import { custodyRow } from '../store/custody-rows.js'
import { signedCustodyEvent } from './custody-signatures.js'
import { readCustody } from './delivery-shapes.js'

/**
 * An excursion assessment, or its withdrawal, into the delivery's custody chain (docs/stability.md,
 * docs/part11.md): an `assessed` (or `assessment_withdrawn`) event whose evidence_hash is the JCS
 * hash of the assessment's content, then the pharmacist's `signed` event bound to it, as a
 * disposition is. Run inside the transaction that stores the assessment; a concurrent append to the
 * same chain makes the insert fail on (delivery_id, seq), and the caller retries.
 */
export async function appendSignedAssessment(
  trx: Executor,
  record: AssessmentRecord,
  signer: Signer,
  principal: Principal,
  nowIso: string,
): Promise<StoredSignature> {
  const head = (await readCustody(trx, record.delivery_id)).at(-1)!
  const event = chainEvent(head.hash, {
    seq: head.seq + 1,
    type: record.action === 'assess' ? 'assessed' : 'assessment_withdrawn',
    actor: { client_id: principal.clientId, sub: principal.sub },
    from: null,
    to: null,
    location: null,
    evidence_hash: assessmentRecordHash(record),
    occurred_at: nowIso,
    recorded_at: nowIso,
  })
  const signed = signedCustodyEvent(record.delivery_id, event, signer, principal, nowIso)
  await trx
    .insertInto('custody_events')
    .values([custodyRow(record.delivery_id, event), custodyRow(record.delivery_id, signed.event)])
    .execute()
  return signed.signature
}

/**
 * Whether `signature` is the one the chain holds for exactly this assessment content: its `signed`
 * event binds to the event before it, and that event's evidence_hash is this content's hash. A
 * signature copied onto another assessment (or edited) reads false.
 */
export function assessmentSignatureVerified(
  chain: readonly CustodyEvent[],
  record: AssessmentRecord,
  signature: StoredSignature | null,
): boolean {
  if (!signature) return false
  const index = chain.findIndex((e) => e.type === 'signed' && e.signature?.id === signature.id)
  if (index < 1) return false
  const signed = chain[index]!
  return (
    signatureFault(record.delivery_id, chain, index) === null &&
    jcsHash(signed.signature) === jcsHash(signature) &&
    chain[index - 1]!.evidence_hash === assessmentRecordHash(record)
  )
}
