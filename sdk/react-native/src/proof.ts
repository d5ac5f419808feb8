import type { components } from '@rxtrace/sdk/schema'
import { uploadRef, type ImageSource, type OfflineQueue, type QueuedAction, type UploadRef } from './offline-queue.js'

export type VerificationMethod = 'otp' | 'id_check' | 'signature'
/** How the patient was verified at the door: `deliver`'s `verification`. */
export type Verification = { method: VerificationMethod; evidence: string }

/** The proofs a delivery needs: its `pod_requirements`, fixed by the dispatch (null when none). */
export type PodRequirements = NonNullable<components['schemas']['Delivery']['pod_requirements']>
export type DocumentType = components['schemas']['ProofOfDelivery']['id_check'] extends infer C
  ? C extends { document_type: infer D }
    ? D
    : never
  : never
export type Proof = 'photo' | 'pin' | 'signature' | 'id_check' | 'barcode'

/** What the driver collected at the door, images not yet uploaded. */
export interface ProofCapture {
  verification: Verification
  photo?: ImageSource
  pin?: string
  signature?: { image: ImageSource; signer_name: string; relationship: string }
  id_check?: { document_type: DocumentType; minimum_age: number; birth_date_verified: boolean }
  barcode?: string
}

/** `deliver`'s body; `photo` and `signature.attachment` are `at_…` ids, or references to queued uploads. */
export interface DeliverBody {
  verification: Verification
  proof: {
    photo?: string | UploadRef
    pin?: string
    signature?: { attachment: string | UploadRef; signer_name: string; relationship: string }
    id_check?: { document_type: DocumentType; minimum_age: number; birth_date_verified: boolean }
    barcode?: string
  }
}

export const pinPattern = /^\d{4,6}$/

/**
 * The required proofs the capture lacks or that would not hold, in the order the API lists them:
 * an empty list means `deliver` may be sent. A PIN is 4–6 digits; a signature names the signer
 * and their relationship; an ID check has the birth date verified, at least the required age and,
 * when the delivery names some, one of its document types.
 */
export function missingProofs(requirements: PodRequirements | null | undefined, capture: Partial<ProofCapture>): Proof[] {
  if (!requirements) return []
  const missing: Proof[] = []
  if (requirements.signature && !(capture.signature && capture.signature.signer_name.trim() && capture.signature.relationship.trim()))
    missing.push('signature')
  if (requirements.photo && !capture.photo) missing.push('photo')
  if (requirements.pin && !(capture.pin && pinPattern.test(capture.pin))) missing.push('pin')
  const idCheck = requirements.id_check
  if (idCheck) {
    const c = capture.id_check
    const holds =
      c !== undefined &&
      c.birth_date_verified &&
      c.minimum_age >= idCheck.minimum_age &&
      (!idCheck.document_types?.length || idCheck.document_types.includes(c.document_type))
    if (!holds) missing.push('id_check')
  }
  if (requirements.barcode && !capture.barcode?.trim()) missing.push('barcode')
  return missing
}

/**
 * The `deliver` body for a capture, the images named by what `attachment` gives for each (an
 * `at_…` id already uploaded, or a reference to a queued upload). Proofs not captured are left out;
 * an optional proof the driver took anyway is sent too.
 */
export function deliverBody(
  capture: ProofCapture,
  attachment: (image: ImageSource, proof: 'photo' | 'signature') => string | UploadRef,
): DeliverBody {
  const proof: DeliverBody['proof'] = {}
  if (capture.photo) proof.photo = attachment(capture.photo, 'photo')
  if (capture.pin) proof.pin = capture.pin
  if (capture.signature)
    proof.signature = {
      attachment: attachment(capture.signature.image, 'signature'),
      signer_name: capture.signature.signer_name.trim(),
      relationship: capture.signature.relationship.trim(),
    }
  if (capture.id_check) proof.id_check = { ...capture.id_check }
  if (capture.barcode) proof.barcode = capture.barcode.trim()
  return { verification: capture.verification, proof }
}

/**
 * Queues the capture's images, then the `deliver` that names them (one write): offline, they wait
 * together and go in that order; the deliver is sent with the ids the uploads were answered with.
 */
export function enqueueDeliver(queue: OfflineQueue, deliveryId: string, capture: ProofCapture): Promise<QueuedAction> {
  const uploads: Record<string, ImageSource> = {}
  if (capture.photo) uploads.photo = capture.photo
  if (capture.signature) uploads.signature = capture.signature.image
  const body = deliverBody(capture, (_, proof) => uploadRef(proof))
  return queue.enqueue({ delivery_id: deliveryId, action: 'deliver', body: body as unknown as Record<string, unknown>, uploads })
}
