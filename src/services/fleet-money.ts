import type { Principal } from '../auth/scopes.js'
import { AppError, notFound } from '../errors.js'
import type { Db } from '../store/schema.js'

/**
 * The walls around a fleet's money (rate cards, reconciliation, dashboard, embed sessions):
 * another fleet's token gets 404, as if the fleet did not exist; a pharmacy token (it may
 * dispatch to the fleet) and a driver's own token get 403; the fleet's own tokens and
 * unrestricted clients pass.
 */
export async function fleetMoneyVisibleTo(db: Db, principal: Principal, fleetId: string): Promise<{ id: string }> {
  const fleet = await db.selectFrom('fleets').select('id').where('id', '=', fleetId).executeTakeFirst()
  if (!fleet || (principal.fleetId && principal.fleetId !== fleetId)) throw notFound('fleet')
  if (principal.pharmacyId)
    throw new AppError('insufficient_scope', 'A pharmacy dispatches to a fleet but never sees its rate card, payouts or dashboard.')
  if (principal.driverId)
    throw new AppError('insufficient_scope', "A driver's token does not see the fleet's rate card, payouts or dashboard.")
  return fleet
}

/** Only an unrestricted client (the deployment's operator) sets what a fleet is paid. */
export function requireUnrestricted(principal: Principal, what: string): void {
  if (principal.pharmacyId || principal.fleetId || principal.driverId)
    throw new AppError('insufficient_scope', `Only an unrestricted client ${what}.`)
}
