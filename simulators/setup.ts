import type { ApiClient } from './api-client.js'

/**
 * What a simulation needs on the service, registered as a pharmacy chain and a fleet would:
 * a pharmacy, a fleet with two drivers, one tote and one cold-chain prescription per trip, and
 * each delivery dispatched with its tote (which binds the tote's readings to it, SPEC §4).
 */

export type Trip = {
  index: number
  deliveryId: string
  rxId: string
  toteId: string
  password: string
  /** When the dispatch bound the tote, epoch ms: readings start here. */
  startMs: number
}

export type Setup = { pharmacyId: string; pharmacyName: string; fleetId: string; driverIds: [string, string]; trips: Trip[] }

/** The refrigerated profile's durations (rules/profiles/refrigerated.json), in seconds. */
const REFRIGERATED = { grace_s: 300, max_excursion_s: 1_800, max_cumulative_s: 3_600, max_gap_s: 900 }

/**
 * The profile the prescriptions are judged by. At speed 1 the built-in `refrigerated`; faster,
 * the same limits with every duration divided by the speed, so a trip replayed 60× faster is
 * judged as the real one would be (a 30-minute excursion that breaks it takes 30 s).
 */
export function profileFor(speed: number): 'refrigerated' | Record<string, unknown> {
  if (speed === 1) return 'refrigerated'
  const scaled = Object.fromEntries(Object.entries(REFRIGERATED).map(([k, s]) => [k, Math.max(s / speed, 1)]))
  return { name: `refrigerated-x${speed}`, min_c: 2, max_c: 8, hard_min_c: 0, hard_max_c: null, mkt_max_c: 8, ...scaled }
}

/** `pharmacyId`: the deliveries go to this pharmacy (the one its pharmacist watches) instead of a new one. */
export async function registerTrips(
  api: ApiClient,
  opts: { totes: number; speed: number; label?: string; pharmacyId?: string | null },
): Promise<Setup> {
  const label = opts.label ?? `sim-${Date.now().toString(36)}`
  const pharmacy = opts.pharmacyId
    ? await api.get<{ id: string; name: string }>(`/v1/pharmacies/${opts.pharmacyId}`)
    : await api.post<{ id: string; name: string }>('/v1/pharmacies', {
        name: `Simulated Pharmacy ${label}`,
        timezone: 'America/Chicago',
        address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      })
  const fleet = await api.post<{ id: string }>('/v1/fleets', { name: `Simulated Couriers ${label}` })
  const first = await api.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })
  const second = await api.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Sam Second' })
  const profile = profileFor(opts.speed)

  const trips: Trip[] = []
  for (let index = 0; index < opts.totes; index++) {
    const tote = await api.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
      serial: `${label}-${index + 1}`,
      pharmacy_id: pharmacy.id,
    })
    const rx = await api.post<{ rx_id: string; delivery_id: string }>('/v1/prescriptions', {
      patient_id: `pt_sim_${index + 1}`,
      pharmacy_id: pharmacy.id,
      cold_chain: true,
      temperature_profile: profile,
      items: [{ description: 'Insulin glargine 100 U/mL pen', quantity: 5 }],
      external_ref: `${label}-${index + 1}`,
    })
    const dispatched = await api.post<{ custody: { type: string; occurred_at: string }[] }>(`/v1/deliveries/${rx.delivery_id}/dispatch`, {
      fleet_id: fleet.id,
      driver_id: first.id,
      tote_id: tote.id,
    })
    const bound = dispatched.custody.find((e) => e.type === 'dispatched')!
    trips.push({
      index,
      deliveryId: rx.delivery_id,
      rxId: rx.rx_id,
      toteId: tote.id,
      password: tote.mqtt.password,
      startMs: Date.parse(bound.occurred_at),
    })
  }
  return { pharmacyId: pharmacy.id, pharmacyName: pharmacy.name, fleetId: fleet.id, driverIds: [first.id, second.id], trips }
}
