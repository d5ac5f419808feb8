import type { DeliveryEvidence } from '../domain/custody-event.js'
import { combineRequirements, unmetProofs, type PodRequirements, type ProofInput, type UnmetProof } from '../domain/proof-of-delivery.js'
import { AppError } from '../errors.js'
import { fromJson, type Database, type Executor } from '../store/schema.js'
import type { DeliveryPins } from './delivery-pin.js'

/** docs/api.md, Proof of delivery: the pharmacy's requirements with the prescription's added, fixed at dispatch. */
export async function requirementsAtDispatch(
  db: Executor,
  delivery: Pick<Database['deliveries'], 'pharmacy_id' | 'rx_id'>,
): Promise<PodRequirements | null> {
  const [pharmacy, prescription] = await Promise.all([
    db.selectFrom('pharmacies').select('pod_requirements').where('id', '=', delivery.pharmacy_id).executeTakeFirst(),
    db.selectFrom('prescriptions').select('pod_requirements').where('id', '=', delivery.rx_id).executeTakeFirst(),
  ])
  return combineRequirements(
    fromJson<PodRequirements | null>(pharmacy?.pod_requirements ?? null),
    fromJson<PodRequirements | null>(prescription?.pod_requirements ?? null),
  )
}

/**
 * The proofs of a `deliver`, checked: every required one present and holding, every image one
 * uploaded for this delivery, then (only when all else holds, so a try is not spent on an
 * incomplete request) the PIN, whose wrong tries are counted. Answers what enters the custody
 * event's `evidence`, or null when the driver named no proof.
 */
export async function checkedEvidence(
  db: Executor,
  pins: DeliveryPins,
  delivery: Pick<Database['deliveries'], 'id' | 'rx_id' | 'pod_requirements'>,
  proof: ProofInput | undefined,
  at: string,
): Promise<DeliveryEvidence | null> {
  const required = fromJson<PodRequirements | null>(delivery.pod_requirements ?? null)
  const prescription = await db.selectFrom('prescriptions').select('items').where('id', '=', delivery.rx_id).executeTakeFirst()
  const items = fromJson<{ gtin?: string; ndc?: string }[] | null>(prescription?.items ?? null) ?? []
  const unmet = unmetProofs(required, proof, { rx_id: delivery.rx_id, items })
  const named = [
    ...(proof?.photo ? [{ proof: 'photo' as const, pointer: '/proof/photo', id: proof.photo }] : []),
    ...(proof?.signature ? [{ proof: 'signature' as const, pointer: '/proof/signature/attachment', id: proof.signature.attachment }] : []),
  ]
  const images = named.length
    ? await db
        .selectFrom('attachments')
        .select(['id', 'sha256'])
        .where('delivery_id', '=', delivery.id)
        .where(
          'id',
          'in',
          named.map((n) => n.id),
        )
        .execute()
    : []
  const sha256Of = new Map(images.map((i) => [i.id, i.sha256]))
  for (const n of named)
    if (!sha256Of.has(n.id))
      unmet.push({ proof: n.proof, pointer: n.pointer, message: `${n.id} is not an image uploaded for this delivery` })
  if (unmet.length) throw unmetError(unmet)
  const pinChecked = Boolean(required?.pin && proof?.pin)
  if (pinChecked) await pins.check(db, delivery.id, proof!.pin!, at)
  if (!proof) return null
  const evidence: DeliveryEvidence = {
    ...(proof.photo ? { photo: { attachment: proof.photo, sha256: sha256Of.get(proof.photo)! } } : {}),
    ...(proof.signature
      ? {
          signature: {
            attachment: proof.signature.attachment,
            sha256: sha256Of.get(proof.signature.attachment)!,
            signer_name: proof.signature.signer_name,
            relationship: proof.signature.relationship,
          },
        }
      : {}),
    ...(proof.id_check ? { id_check: { ...proof.id_check } } : {}),
    ...(proof.barcode ? { barcode: proof.barcode } : {}),
    ...(pinChecked ? { pin: 'verified' as const } : {}),
  }
  return Object.keys(evidence).length ? evidence : null
}

const unmetError = (unmet: UnmetProof[]) =>
  new AppError('pod_requirements_unmet', 'The delivery lacks a proof it requires, or one does not hold.', {
    unmet,
    missing: [...new Set(unmet.map((u) => u.proof))],
  })
