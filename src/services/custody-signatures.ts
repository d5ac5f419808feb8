import type { Principal } from '../auth/scopes.js'
import type { Signer } from '../auth/e-signatures.js'
import { chainEvent, type CustodyEvent, type StoredSignature } from '../domain/custody.js'
import { custodyRecordHash } from '../domain/e-signature.js'
import { newId } from '../ids.js'

/**
 * A person's e-signature of the custody event just appended, as its own `signed` event right
 * after it (docs/part11.md): the signature names the signer, the moment and the meaning, and its
 * record_hash binds it to that event of that delivery, so copied elsewhere it does not verify.
 */
export function signedCustodyEvent(
  deliveryId: string,
  signed: CustodyEvent,
  signer: Signer,
  principal: Principal,
  nowIso: string,
): { signature: StoredSignature; event: CustodyEvent } {
  const record_hash = custodyRecordHash(deliveryId, signed)
  const signature: StoredSignature = {
    id: newId('sg'),
    signer: signer.id,
    name: signer.name,
    email: signer.email,
    meaning: signer.meaning,
    signed_at: nowIso,
    record_hash,
    method: signer.method,
  }
  const event = chainEvent(signed.hash, {
    seq: signed.seq + 1,
    type: 'signed',
    actor: { client_id: principal.clientId, sub: principal.sub },
    from: null,
    to: null,
    location: null,
    evidence_hash: record_hash,
    occurred_at: nowIso,
    recorded_at: nowIso,
    signature,
  })
  return { signature, event }
}
