import type { Principal } from '../auth/scopes.js'
import { notFound } from '../errors.js'
import type { Database, Db } from '../store/schema.js'
import { canSee } from '../auth/tenancy.js'

/**
 * A delivery the caller may see: its tenant's, and for a driver user (role driver) only one
 * assigned to that driver. Anything else is 404, as if it did not exist.
 */
export function visibleDelivery<T extends Pick<Database['deliveries'], 'pharmacy_id' | 'fleet_id' | 'driver_id'>>(
  principal: Principal,
  row: T | undefined,
): T {
  if (!row || !canSee(principal, row) || (principal.driverId && row.driver_id !== principal.driverId)) throw notFound('delivery')
  return row
}

/**
 * Whether the caller may see an event: its tenant's, and for a driver user only an event of a
 * delivery assigned to that driver now (so an event of no delivery, such as a tote's, is not theirs).
 */
export async function eventVisible(
  db: Db,
  principal: Principal,
  event: Pick<Database['events'], 'pharmacy_id' | 'fleet_id' | 'delivery_id'> | undefined,
): Promise<boolean> {
  if (!event || !canSee(principal, event)) return false
  if (!principal.driverId) return true
  if (!event.delivery_id) return false
  const delivery = await db.selectFrom('deliveries').select('driver_id').where('id', '=', event.delivery_id).executeTakeFirst()
  return delivery?.driver_id === principal.driverId
}
