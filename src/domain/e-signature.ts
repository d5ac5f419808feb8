import { z } from 'zod'
import { jcsHash } from '../hashing.js'
import type { CustodyEvent, SignatureMeaning } from './custody-event.js'

export type { SignatureMeaning, StoredSignature } from './custody-event.js'

/**
 * Electronic signatures (21 CFR Part 11, docs/part11.md). Pure: what a signature is bound to and
 * how that binding is checked; who may sign is decided in src/auth/e-signatures.ts.
 */

export const signatureMeanings = [
  'released',
  'returned',
  'assessed',
  'approved',
  'handed_over',
] as const satisfies readonly SignatureMeaning[]

export const storedSignatureSchema = z.object({
  id: z.string().describe('sg_…'),
  signer: z.string().describe('The person who signed (us_…)'),
  name: z.string().describe("The signer's printed name (21 CFR 11.50(a)(1))"),
  email: z.string(),
  meaning: z.enum(signatureMeanings).describe('What the signature means (21 CFR 11.50(a)(3))'),
  signed_at: z.string().describe('When it was signed (RFC 3339 UTC; 21 CFR 11.50(a)(2))'),
  record_hash: z.string().describe("sha256 over the JCS of the signed record's content: the signature cannot be moved to another record"),
  method: z
    .enum(['password', 'recent_sign_in'])
    .describe('`password`: re-entered when signing; `recent_sign_in`: the token says the password was entered at most 300 s before'),
})

/** The decision each disposition is signed with: the person says what their signature means, and it must say the same. */
export const dispositionMeaning = { release: 'released', return: 'returned' } as const satisfies Record<string, SignatureMeaning>

/**
 * The record a custody signature signs: the custody event just before the `signed` event, named
 * with its delivery. The event's hash covers what it says (a disposition's decision and note
 * through its evidence_hash) and, through prev_hash, everything before it.
 */
export function custodyRecordHash(deliveryId: string, signed: CustodyEvent): string {
  return jcsHash({ delivery_id: deliveryId, event: signed })
}

/** The content of a product's stability version that its `approved` signature signs (it is never edited). */
export type StabilityRecord = { product_id: string; version: number; stability: unknown; effective_from: string }

export function stabilityRecordHash({ product_id, version, stability, effective_from }: StabilityRecord): string {
  return jcsHash({ product_id, version, stability, effective_from })
}

/** The content of an excursion assessment (or its withdrawal) that its `assessed` signature signs, through its custody event. */
export type AssessmentRecord = {
  action: 'assess' | 'withdraw'
  id: string
  delivery_id: string
  ndc: string
  band: number
  add_back_s: number
  justification: string
  created_at: string
  withdrawn_at: string | null
}

/** The evidence_hash of an assessment's custody event: sha256 over the JCS of what was assessed (or withdrawn). */
export function assessmentRecordHash(r: AssessmentRecord): string {
  const { action, id, delivery_id, ndc, band, add_back_s, justification, created_at, withdrawn_at } = r
  return jcsHash({ action, id, delivery_id, ndc, band, add_back_s, justification, created_at, withdrawn_at })
}

/** Why the `signed` event at `index` does not bind to the event before it, or null when it does. */
export function signatureFault(deliveryId: string | undefined, events: readonly CustodyEvent[], index: number): string | null {
  const event = events[index]!
  const previous = events[index - 1]
  if (event.type !== 'signed') return event.signature ? 'only a signed event carries a signature' : null
  if (!event.signature || !previous) return 'a signed event must carry a signature and follow the event it signs'
  if (deliveryId === undefined) return 'a signature is checked against its delivery'
  if (event.signature.record_hash !== custodyRecordHash(deliveryId, previous))
    return 'the signature does not bind to the record it follows (record_hash does not match)'
  if (event.evidence_hash !== event.signature.record_hash) return "the signed event's evidence_hash is not its signature's record_hash"
  return null
}
