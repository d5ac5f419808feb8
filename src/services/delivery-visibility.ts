import type { Principal } from '../auth/scopes.js'
import { notFound } from '../errors.js'
import type { Database } from '../store/schema.js'
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
