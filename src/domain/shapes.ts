/**
 * The API's public shapes as TypeScript types, for the service and the console alike
 * (console/src/api.ts). Types only: nothing here, nor in what it imports with `import type`,
 * reaches a bundle, and nothing names Node, so the browser build type-checks it too.
 */
import type { StabilitySummary } from '../../rules/stability-summary.js'
import type { Attempt } from './attempts.js'
import type { ColdChain } from './cold-chain.js'
import type { CustodyEvent } from './custody-event.js'
import type { DeliveryStatus } from './delivery-machine.js'
import type { PodRequirements } from './proof-of-delivery.js'
import type { SensorWarning } from './sensor-calibration.js'
import type { TemperatureTrace, TraceExcursion } from './temperature-trace.js'

export type { CustodyEvent, TemperatureTrace, TraceExcursion }

/** A delivery as the API returns it (GET /v1/deliveries/{id}). */
export type Delivery = {
  id: string
  rx_id: string
  /** 1, or n + 1 for the n-th redelivery of the prescription (docs/stability.md, Redelivery). */
  leg: number
  pharmacy_id: string
  status: DeliveryStatus
  eta: string
  fleet_id: string | null
  driver_id: string | null
  tote_id: string | null
  cold_chain: ColdChain
  /** Only when items name products (docs/stability.md). */
  stability?: StabilitySummary
  /** Delivered within every item's stability budget under auto_within_budget: released by the system. */
  release?: {
    by: 'system'
    rule: 'stability_budget'
    versions: { ndc: string; product_id: string; version: number }[]
    remaining_fraction: number
    at: string
  }
  /** What its dispatch warned of: a tote past its calibration under the pharmacy's `warn`, or one with no sensor record. */
  warnings?: SensorWarning[]
  /** The attempt under way or last made (docs/api.md, Attempts): 1, plus one per reattempt. */
  attempt: number
  /** Each attempt since the dispatch, oldest first, with why it failed. */
  attempts: Attempt[]
  /** The proofs `deliver` needs, fixed by the dispatch (docs/api.md, Proof of delivery); null before it, or when none. */
  pod_requirements?: PodRequirements | null
  custody: CustodyEvent[]
  created_at: string
  updated_at: string
  /** List with `expand=prescription`: what the pharmacist knows the shipment by. */
  prescription?: {
    patient_id: string
    items: { description: string; ndc?: string; quantity: number }[]
    deliver_by: string | null
    external_ref: string | null
  }
  /** List with `expand=driver`: null while none is assigned. */
  driver?: { id: string; name: string | null } | null
  /** List with `expand=last_position`: where the driver was last seen while in progress; null otherwise or before any position. */
  last_position?: { lat: number; lng: number; accuracy_m: number; at: string; distance_m: number | null } | null
}
