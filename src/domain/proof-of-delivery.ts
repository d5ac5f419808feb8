import { gtin14, gtinFromNdc } from './gs1.js'

/**
 * Proof of delivery (docs/api.md, Proof of delivery). Pure: what a pharmacy and a prescription
 * require, how the two combine, and which required proofs a `deliver` lacks or gets wrong.
 */

export const identityDocuments = ['drivers_license', 'state_id', 'passport', 'military_id', 'other'] as const
export type IdentityDocument = (typeof identityDocuments)[number]

/** What a delivery needs; a member absent (or false) is not required. */
export type PodRequirements = {
  signature?: boolean | undefined
  photo?: boolean | undefined
  pin?: boolean | undefined
  barcode?: boolean | undefined
  id_check?: { minimum_age: number; document_types?: IdentityDocument[] | undefined } | undefined
}

export const proofKinds = ['signature', 'photo', 'pin', 'id_check', 'barcode'] as const
export type ProofKind = (typeof proofKinds)[number]

/** The proofs a driver names in `deliver`; attachments by id, the PIN as the patient said it. */
export type ProofInput = {
  photo?: string | undefined
  pin?: string | undefined
  signature?: { attachment: string; signer_name: string; relationship: string } | undefined
  id_check?: { document_type: IdentityDocument; minimum_age: number; birth_date_verified: boolean } | undefined
  barcode?: string | undefined
}

/** Only what is required, in one canonical form (absent rather than false); null when nothing is. */
export function normalizeRequirements(r: PodRequirements | null | undefined): PodRequirements | null {
  if (!r) return null
  const out: PodRequirements = {}
  for (const kind of ['signature', 'photo', 'pin', 'barcode'] as const) if (r[kind]) out[kind] = true
  if (r.id_check)
    out.id_check = {
      minimum_age: r.id_check.minimum_age,
      ...(r.id_check.document_types?.length ? { document_types: [...new Set(r.id_check.document_types)].sort() } : {}),
    }
  return Object.keys(out).length ? out : null
}

/**
 * A prescription adds to its pharmacy's requirements and never takes one away: every proof either
 * requires is required; of two ID checks the older minimum age holds, and the prescription's list
 * of documents (when it names one) replaces the pharmacy's.
 */
export function combineRequirements(pharmacy: PodRequirements | null, prescription: PodRequirements | null): PodRequirements | null {
  const a = normalizeRequirements(pharmacy) ?? {}
  const b = normalizeRequirements(prescription) ?? {}
  const idCheck =
    a.id_check || b.id_check
      ? {
          minimum_age: Math.max(a.id_check?.minimum_age ?? 0, b.id_check?.minimum_age ?? 0),
          document_types: b.id_check?.document_types ?? a.id_check?.document_types,
        }
      : undefined
  return normalizeRequirements({
    signature: a.signature || b.signature,
    photo: a.photo || b.photo,
    pin: a.pin || b.pin,
    barcode: a.barcode || b.barcode,
    id_check: idCheck,
  })
}

/** One required proof that `deliver` lacks or that does not hold. */
export type UnmetProof = { proof: ProofKind; pointer: string; message: string }

/** What the barcode may equal: the rx_id, or an item's GTIN (given, or its NDC's, GS1 US). */
export type BarcodeFacts = { rx_id: string; items: readonly { gtin?: string | undefined; ndc?: string | undefined }[] }

/**
 * The required proofs the input lacks or gets wrong, in a fixed order. The PIN is only checked
 * for presence here: its value is the service's to compare (delivery-pin.ts), with its tries.
 */
export function unmetProofs(required: PodRequirements | null, proof: ProofInput | undefined, facts: BarcodeFacts): UnmetProof[] {
  const unmet: UnmetProof[] = []
  if (!required) return unmet
  const p = proof ?? {}
  if (required.signature && !p.signature)
    unmet.push({
      proof: 'signature',
      pointer: '/proof/signature',
      message: 'a signature image, the signer’s name and relationship are required',
    })
  if (required.photo && !p.photo) unmet.push({ proof: 'photo', pointer: '/proof/photo', message: 'a photo of the delivery is required' })
  if (required.pin && !p.pin) unmet.push({ proof: 'pin', pointer: '/proof/pin', message: 'the PIN the patient was given is required' })
  if (required.id_check) {
    const need = required.id_check
    const id = p.id_check
    if (!id)
      unmet.push({ proof: 'id_check', pointer: '/proof/id_check', message: `an ID check (minimum age ${need.minimum_age}) is required` })
    else if (!id.birth_date_verified)
      unmet.push({
        proof: 'id_check',
        pointer: '/proof/id_check/birth_date_verified',
        message: 'the birth date on the document must be verified',
      })
    else if (id.minimum_age < need.minimum_age)
      unmet.push({ proof: 'id_check', pointer: '/proof/id_check/minimum_age', message: `must be at least ${need.minimum_age}` })
    else if (need.document_types && !need.document_types.includes(id.document_type))
      unmet.push({
        proof: 'id_check',
        pointer: '/proof/id_check/document_type',
        message: `must be one of ${need.document_types.join(', ')}`,
      })
  }
  if (required.barcode) {
    if (!p.barcode) unmet.push({ proof: 'barcode', pointer: '/proof/barcode', message: 'a scan of the Rx label is required' })
    else if (!barcodeMatches(p.barcode, facts))
      unmet.push({
        proof: 'barcode',
        pointer: '/proof/barcode',
        message: 'does not match this prescription’s rx_id or any of its items’ GTINs',
      })
  }
  return unmet
}

/** A scan equals the rx_id, or (as a GTIN-8/12/13/14, or a GS1 element string `(01)`/`01` + GTIN-14) an item's GTIN. */
function barcodeMatches(scan: string, facts: BarcodeFacts): boolean {
  const text = scan.trim()
  if (text === facts.rx_id) return true
  // A GS1 DataMatrix on a drug package starts with AI (01), the GTIN-14 (DSCSA); what follows (serial, lot, expiry) is not compared.
  const ai = /^\(?01\)?(\d{14})/.exec(text)
  const scanned = gtin14(text) ?? (ai ? gtin14(ai[1]!) : null)
  if (!scanned) return false
  return facts.items.some((item) => {
    const own = item.gtin ? gtin14(item.gtin) : null
    const fromNdc = item.ndc ? (gtinFromNdc(item.ndc)?.gtin ?? null) : null
    return scanned === own || scanned === fromNdc
  })
}
