import type { Signer } from '../auth/e-signatures.js'
import { storedFigures, type StoredColdChain } from '../domain/cold-chain.js'
import type { AutomaticRelease } from './stability-release.js'
import type { SensorWarning } from '../domain/sensor-calibration.js'
import { attemptNumber, attemptsOf } from '../domain/attempts.js'
import type { CustodyEvent, FailureReason } from '../domain/custody.js'
import { toCustodyEvent } from '../store/custody-rows.js'
import type { DeliveryStatus } from '../domain/delivery-machine.js'
import type { Delivery } from '../domain/shapes.js'
import { fromJson, type Database, type Executor } from '../store/schema.js'
import type { PodRequirements, ProofInput } from '../domain/proof-of-delivery.js'

export type { Delivery } from '../domain/shapes.js'

type Location = { lat: number; lng: number }
type Common = { occurred_at?: string | undefined; location?: Location | undefined }
/** The body of `POST /deliveries/{id}/actions`, one member per action. */
export type ActionInput =
  | ({ action: 'dispatch'; fleet_id: string; driver_id?: string | undefined; tote_id?: string | undefined } & Common)
  | ({ action: 'pickup' | 'handoff' | 'return'; from: string; to: string; signature: string } & Common)
  | ({
      action: 'deliver'
      verification: { method: 'otp' | 'id_check' | 'signature'; evidence: string }
      proof?: ProofInput | undefined
    } & Common)
  | ({ action: 'fail'; reason: FailureReason; note?: string | undefined } & Common)
  | ({ action: 'reattempt'; driver_id?: string | undefined } & Common)
  | ({ action: 'cancel'; reason: string } & Common)
  /** `signer`: the person the route authenticated for the e-signature (their password is not carried this far). */
  | ({ action: 'disposition'; decision: 'release' | 'return'; note: string; signer: Signer } & Common)

export function toDelivery(row: Database['deliveries'], custody: CustodyEvent[]): Delivery {
  const required = row.cold_chain_required === 1
  // The stability ledger's summary is stored with the figures and shown beside them.
  const { stability, ...stored } = fromJson<Partial<StoredColdChain> | null>(row.cold_chain) ?? {}
  const figures = storedFigures(required, stored)
  return {
    id: row.id,
    rx_id: row.rx_id,
    leg: row.leg,
    pharmacy_id: row.pharmacy_id,
    status: row.status as DeliveryStatus,
    eta: row.live_eta ?? row.eta,
    fleet_id: row.fleet_id,
    driver_id: row.driver_id,
    tote_id: row.tote_id,
    cold_chain: { required, profile: fromJson(row.profile), ...figures, disposition: fromJson(row.disposition) },
    ...(stability ? { stability } : {}),
    ...(row.release ? { release: fromJson<AutomaticRelease>(row.release) } : {}),
    ...(row.warnings ? { warnings: fromJson<SensorWarning[]>(row.warnings) } : {}),
    attempt: attemptNumber(custody),
    attempts: attemptsOf(custody),
    pod_requirements: fromJson<PodRequirements | null>(row.pod_requirements ?? null),
    custody,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}

/** The delivery's custody chain, oldest first. */
export async function readCustody(db: Executor, deliveryId: string): Promise<CustodyEvent[]> {
  const rows = await db.selectFrom('custody_events').selectAll().where('delivery_id', '=', deliveryId).orderBy('seq').execute()
  return rows.map(toCustodyEvent)
}
