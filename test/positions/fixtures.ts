import { expect } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { signedInToken } from '../helpers/users.js'

/** The patient's door, in Chicago. */
const DOOR = { lat: 41.8781, lng: -87.6298 }
/** One degree of latitude, in metres, on the sphere the service measures on. */
const METRES_PER_DEGREE = (Math.PI / 180) * 6_371_008.8

/** A point `metres` due north of the door. */
export const northOfDoor = (metres: number) => ({ lat: DOOR.lat + metres / METRES_PER_DEGREE, lng: DOOR.lng })

export const signature = 'data:image/png;base64,iVBORw0KGgo='

/**
 * A pharmacy, a fleet with two drivers (each with a signed-in driver user), another fleet with
 * its own driver user, and a way to send a delivery out to a driver with the door's coordinates.
 */
export async function lastMileWorld(api: TestApi, promisedInMs: number) {
  const admin = await api.adminToken()
  const pharmacyId = (await api.pharmacy(admin)).id
  const fleet = await api.fleetWithDriver(admin)
  const other = await api.fleetWithDriver(admin)
  const driverToken = await signedInToken(api, admin, { role: 'driver', fleet_id: fleet.fleetId, driver_id: fleet.driverId })
  const secondDriverToken = await signedInToken(api, admin, { role: 'driver', fleet_id: fleet.fleetId, driver_id: fleet.driver2Id })
  const otherDriverToken = await signedInToken(api, admin, { role: 'driver', fleet_id: other.fleetId, driver_id: other.driverId })

  /** A delivery dispatched to `driverId` (and picked up unless told otherwise), the door's coordinates on its address. */
  async function outFor(
    driverId: string,
    { pickedUp = true, address = { line1: '1 Patient Way', ...DOOR } as Record<string, unknown> } = {},
  ) {
    const deliverBy = new Date(api.service.clock.now() + promisedInMs).toISOString()
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, deliver_by: deliverBy, delivery_address: address })
    const fleetId = driverId === other.driverId ? other.fleetId : fleet.fleetId
    const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
    expect(dispatched.status, dispatched.text).toBe(200)
    if (pickedUp) {
      const picked = await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacyId, to: driverId, signature })
      expect(picked.status, picked.text).toBe(200)
    }
    return { deliveryId: rx.delivery_id, deliverBy }
  }

  return { admin, pharmacyId, fleet, other, driverToken, secondDriverToken, otherDriverToken, outFor }
}

/** The delivery's events of the given types, in order. */
export async function eventsOf(api: TestApi, deliveryId: string, types: string[]) {
  const rows = await api.service.db
    .selectFrom('events')
    .select(['type', 'data'])
    .where('delivery_id', '=', deliveryId)
    .where('type', 'in', types)
    .orderBy('pos')
    .execute()
  return rows.map((r) => ({ type: r.type, data: JSON.parse(r.data) as Record<string, any> }))
}
