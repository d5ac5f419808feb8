import type { Principal } from '../auth/scopes.js'
import { canSee } from '../auth/tenancy.js'
import { AppError, validationFailed } from '../errors.js'
import { fromJson, type Database, type Executor } from '../store/schema.js'
import { calibrationVerdict, type CalibrationPolicy, type SensorRecord, type SensorWarning } from '../domain/sensor-calibration.js'
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
  /** Filled with what the dispatch warns of (a tote past calibration under the pharmacy's `warn`). */
  warnings: SensorWarning[] = [],
): Promise<void> {
  const fleet = await db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst()
  if (!fleet || (principal.fleetId && principal.fleetId !== fleet.id))
    throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
  if (input.driver_id) await checkDriver(db, { ...delivery, fleet_id: input.fleet_id }, input.driver_id, '/driver_id')
  if (delivery.cold_chain_required && !input.tote_id)
    throw validationFailed([{ pointer: '/tote_id', message: 'is required for a cold-chain delivery' }])
  if (!input.tote_id) return
  const tote = await db
    .selectFrom('totes')
    .select(['id', 'pharmacy_id', 'fleet_id', 'sensor'])
    .where('id', '=', input.tote_id)
    .executeTakeFirst()
  if (!tote || !(tote.pharmacy_id === delivery.pharmacy_id || tote.fleet_id === input.fleet_id)) {
    throw validationFailed([{ pointer: '/tote_id', message: `no tote ${input.tote_id} of this pharmacy or fleet` }])
  }
  if (delivery.cold_chain_required) warnings.push(...(await checkCalibration(db, delivery, tote, occurredAt)))
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

/**
 * docs/api.md, Totes: sensor and calibration. A cold-chain delivery is judged by its tote's sensor:
 * one due for calibration is refused (409) or, under the pharmacy's `warn`, warned of.
 */
async function checkCalibration(
  db: Executor,
  delivery: Database['deliveries'],
  tote: Pick<Database['totes'], 'id' | 'sensor'>,
  occurredAt: string,
): Promise<SensorWarning[]> {
  const pharmacy = await db.selectFrom('pharmacies').select('calibration_policy').where('id', '=', delivery.pharmacy_id).executeTakeFirst()
  const policy = (pharmacy?.calibration_policy ?? 'refuse') as CalibrationPolicy
  const verdict = calibrationVerdict(tote.id, fromJson<SensorRecord | null>(tote.sensor), policy, occurredAt)
  if (verdict.refuse)
    throw new AppError('sensor_calibration_due', verdict.warning.message, {
      errors: [{ pointer: '/tote_id', message: verdict.warning.message }],
      tote_id: tote.id,
      calibration_due: verdict.warning.calibration_due,
    })
  return verdict.warning ? [verdict.warning] : []
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
