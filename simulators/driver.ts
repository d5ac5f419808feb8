import { createHash } from 'node:crypto'
import { ApiError, type ApiClient } from './api-client.js'

/**
 * A courier's app, simulated: the custody actions of SPEC §3 on one delivery, each with the
 * evidence a real app would send (a signed statement standing in for a signature image).
 * Every call returns the updated delivery; refusals surface as `ApiError` with the problem.
 */

export type DeliveryView = {
  id: string
  status: string
  cold_chain: {
    state: string
    min_c: number | null
    max_c: number | null
    mkt_c: number | null
    time_out_of_range_s: number
    excursions: unknown[]
    break_reason?: string | null
  }
  custody: { seq: number; type: string; hash: string }[]
}

const signature = (who: string, what: string) => `signed:${who}:${what}:${new Date().toISOString()}`

export class CourierApp {
  constructor(
    private readonly api: ApiClient,
    readonly deliveryId: string,
    private readonly pharmacyId: string,
  ) {}

  pickup(driverId: string): Promise<DeliveryView> {
    return this.act('pickup', { from: this.pharmacyId, to: driverId, signature: signature(driverId, 'received at the pharmacy counter') })
  }

  handoff(fromDriverId: string, toDriverId: string): Promise<DeliveryView> {
    return this.act('handoff', { from: fromDriverId, to: toDriverId, signature: signature(toDriverId, `took over from ${fromDriverId}`) })
  }

  /** The patient reads out the one-time code the pharmacy sent them. */
  deliver(): Promise<DeliveryView> {
    const otp = String(parseInt(createHash('sha256').update(this.deliveryId).digest('hex').slice(0, 8), 16) % 1_000_000).padStart(6, '0')
    return this.act('deliver', { verification: { method: 'otp', evidence: otp } })
  }

  returnToPharmacy(driverId: string): Promise<DeliveryView> {
    return this.act('return', {
      from: driverId,
      to: this.pharmacyId,
      signature: signature(this.pharmacyId, 'received back for quarantine'),
    })
  }

  read(): Promise<DeliveryView> {
    return this.api.get<DeliveryView>(`/v1/deliveries/${this.deliveryId}`)
  }

  private act(action: string, body: unknown): Promise<DeliveryView> {
    return this.api.post<DeliveryView>(`/v1/deliveries/${this.deliveryId}/${action}`, body)
  }
}

/** The stable problem code of a refused action (`cold_chain_hold`, `invalid_transition`, …), or rethrows. */
export function refusal(error: unknown): string {
  if (error instanceof ApiError) return error.problem?.code ?? String(error.status)
  throw error
}
