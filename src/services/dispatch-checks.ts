import type { Principal } from '../auth/scopes.js'
import { canSee } from '../auth/tenancy.js'
import { AppError, validationFailed } from '../errors.js'
import type { Database, Executor } from '../store/schema.js'
import type { ActionInput } from './delivery-shapes.js'

/**
 * What a dispatch names must exist and be free (docs/api.md, Deliveries): the fleet (the
 * caller's own, for a fleet), its driver, and for a cold-chain delivery a tote of this pharmacy
 * or fleet that no open delivery holds and that no earlier delivery held at `occurredAt`.
 */
export async function checkDispatch(
  db: Executor,
  principal: Principal,
  delivery: Database['deliveries'],
  input: Extract<ActionInput, { action: 'dispatch' }>,
  occurredAt: string,
): Promise<void> {
  const fleet = await db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst()
  if (!fleet || (principal.fleetId && principal.fleetId !== fleet.id))
    throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
  if (input.driver_id) await checkDriver(db, { ...delivery, fleet_id: input.fleet_id }, input.driver_id, '/driver_id')
  if (delivery.cold_chain_required && !input.tote_id)
    throw validationFailed([{ pointer: '/tote_id', message: 'is required for a cold-chain delivery' }])
  if (!input.tote_id) return
  const tote = await db.selectFrom('totes').select(['id', 'pharmacy_id', 'fleet_id']).where('id', '=', input.tote_id).executeTakeFirst()
  if (!tote || !(tote.pharmacy_id === delivery.pharmacy_id || tote.fleet_id === input.fleet_id)) {
    throw validationFailed([{ pointer: '/tote_id', message: `no tote ${input.tote_id} of this pharmacy or fleet` }])
  }
  const open = await db
    .selectFrom('deliveries')
    .select(['id', 'pharmacy_id', 'fleet_id'])
    .where('tote_id', '=', tote.id)
    .where('bound_to', 'is', null)
    .executeTakeFirst()
  if (open) {
    // A fleet's tote may be busy with another pharmacy's delivery: name it only to whoever may see it.
    const busyWith = canSee(principal, open) ? `the open delivery ${open.id}` : 'another open delivery'
    throw new AppError('conflict', `Tote ${tote.id} is bound to ${busyWith}.`, {
      errors: [{ pointer: '/tote_id', message: `bound to ${busyWith}` }],
    })
  }
  const last = await db
    .selectFrom('deliveries')
    .select('bound_to')
    .where('tote_id', '=', tote.id)
    .orderBy('bound_to', 'desc')
    .limit(1)
    .executeTakeFirst()
  if (last?.bound_to && last.bound_to > occurredAt) {
    throw validationFailed([{ pointer: '/occurred_at', message: `tote ${tote.id} was still on another delivery until ${last.bound_to}` }])
  }
}

/** The party named at `pointer` must be a driver of the delivery's fleet. */
export async function checkDriver(
  db: Executor,
  delivery: Pick<Database['deliveries'], 'fleet_id'>,
  driverId: string,
  pointer: string,
): Promise<void> {
  const driver = await db.selectFrom('drivers').select('fleet_id').where('id', '=', driverId).executeTakeFirst()
  if (!driver || driver.fleet_id !== delivery.fleet_id)
    throw validationFailed([{ pointer, message: `${driverId} is not a driver of fleet ${delivery.fleet_id}` }])
}
