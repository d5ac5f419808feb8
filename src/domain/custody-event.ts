// No imports: the service (custody.ts) and the console (shapes.ts) share these definitions.

export type CustodyType =
  | 'created'
  | 'dispatched'
  | 'picked_up'
  | 'handoff'
  | 'delivered'
  | 'failed'
  | 'reattempted'
  | 'returned'
  | 'cancelled'
  | 'disposition'
  | 'assessed'
  | 'assessment_withdrawn'
  | 'signed'

/** Why a person signed (21 CFR 11.50(a)(3)): the meaning a signature carries. */
export type SignatureMeaning = 'released' | 'returned' | 'assessed' | 'approved' | 'handed_over'

/**
 * An e-signature as stored and shown (docs/part11.md): `record_hash` is sha256 over the JCS of
 * the record it signs, so the signature cannot be moved to another record (21 CFR 11.70).
 */
export type StoredSignature = {
  id: string
  signer: string
  name: string
  email: string
  meaning: SignatureMeaning
  signed_at: string
  record_hash: string
  /** `password`: re-entered at the moment of signing; `recent_sign_in`: the token's auth_time was at most 300 s old. */
  method: 'password' | 'recent_sign_in'
}

/** Why an attempt failed (docs/api.md, Attempts). */
export const failureReasons = ['patient_unavailable', 'address_problem', 'refused', 'unsafe', 'other'] as const
export type FailureReason = (typeof failureReasons)[number]

/**
 * The cold chain at the moment of a custody event (docs/api.md, Temperature at each handoff):
 * the newest reading of the delivery's binding at or before `occurred_at` (both null while there
 * is none) and the cold-chain state judged for that moment.
 */
export type HandoffTemperature = { last_c: number | null; at: string | null; state: 'OK' | 'EXCURSION' | 'BROKEN' }

/** On a `failed` event: the attempt that failed and why; on a `reattempted` event: the attempt it starts. */
export type CustodyAttempt = { number: number; reason?: FailureReason; note?: string | null }
/**
 * What a proof of delivery adds to its `delivered` event (docs/api.md, Proof of delivery): each
 * image by its attachment id and sha256 (hex of the stored bytes), the other proofs as given, and
 * `pin: "verified"` when the service compared the PIN (never the PIN itself).
 */
export type DeliveryEvidence = {
  photo?: { attachment: string; sha256: string }
  signature?: { attachment: string; sha256: string; signer_name: string; relationship: string }
  id_check?: { document_type: string; minimum_age: number; birth_date_verified: boolean }
  barcode?: string
  pin?: 'verified'
}

/** A custody event exactly as the API returns it; `hash` covers every other member. */
export type CustodyEvent = {
  seq: number
  type: CustodyType
  actor: { client_id: string; sub: string }
  from: string | null
  to: string | null
  location: { lat: number; lng: number } | null
  evidence_hash: string | null
  occurred_at: string
  recorded_at: string
  prev_hash: string
  hash: string
  /** On a `signed` event only: the signature of the event just before it. */
  signature?: StoredSignature
  /** On events of a cold-chain delivery recorded since handoff temperatures were kept; absent otherwise. */
  temperature?: HandoffTemperature
  /** On `failed` and `reattempted` events only. */
  attempt?: CustodyAttempt
  /** On a `delivered` event with proofs only; absent on every other event, whose hash was computed without it. */
  evidence?: DeliveryEvidence
}
