import type { Principal } from '../auth/scopes.js'
import { AppError, validationFailed } from '../errors.js'
import type { Executor } from '../store/schema.js'
import type { Owner } from './tenant-limits.js'

/** A restricted token's endpoint hears its tenant; an admin may name one, or neither for all. */
export async function endpointTenant(
  db: Executor,
  principal: Principal,
  input: { pharmacy_id?: string | undefined; fleet_id?: string | undefined },
): Promise<Owner> {
  if (principal.pharmacyId || principal.fleetId) {
    if ((input.pharmacy_id && input.pharmacy_id !== principal.pharmacyId) || (input.fleet_id && input.fleet_id !== principal.fleetId)) {
      throw validationFailed([{ pointer: input.pharmacy_id ? '/pharmacy_id' : '/fleet_id', message: 'must be the tenant of your token' }])
    }
    return { pharmacy_id: principal.pharmacyId, fleet_id: principal.fleetId }
  }
  if (input.pharmacy_id && input.fleet_id)
    throw validationFailed([{ pointer: '/fleet_id', message: 'name a pharmacy or a fleet, not both' }])
  if (input.pharmacy_id && !(await db.selectFrom('pharmacies').select('id').where('id', '=', input.pharmacy_id).executeTakeFirst())) {
    throw validationFailed([{ pointer: '/pharmacy_id', message: `no pharmacy ${input.pharmacy_id}` }])
  }
  if (input.fleet_id && !(await db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst())) {
    throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
  }
  return { pharmacy_id: input.pharmacy_id ?? null, fleet_id: input.fleet_id ?? null }
}

/** One URL, one endpoint per tenant: N endpoints at one URL would turn each event into N POSTs to it. */
export async function refuseSameUrl(db: Executor, owner: Owner, url: string): Promise<void> {
  let query = db.selectFrom('webhook_endpoints').select('id').where('kind', '=', 'webhook').where('url', '=', url)
  query = owner.pharmacy_id === null ? query.where('pharmacy_id', 'is', null) : query.where('pharmacy_id', '=', owner.pharmacy_id)
  query = owner.fleet_id === null ? query.where('fleet_id', 'is', null) : query.where('fleet_id', '=', owner.fleet_id)
  const same = await query.executeTakeFirst()
  if (same) {
    throw new AppError('conflict', `Endpoint ${same.id} already receives this tenant's events at this URL; change its events instead.`, {
      errors: [{ pointer: '/url', message: `already registered as ${same.id}` }],
    })
  }
}
