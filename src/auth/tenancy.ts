import type { Principal } from './scopes.js'
import { notFound } from '../errors.js'

export type Tenanted = { pharmacy_id?: string | null; fleet_id?: string | null }

/**
 * docs/api.md, Tenancy: a token restricted to a pharmacy sees that pharmacy's resources; one restricted to a
 * fleet sees that fleet's. Anything else answers 404, as if it did not exist.
 */
export function canSee(principal: Principal, resource: Tenanted): boolean {
  if (principal.pharmacyId) return resource.pharmacy_id === principal.pharmacyId
  if (principal.fleetId) return resource.fleet_id === principal.fleetId
  return true
}

export function visibleOr404<T extends Tenanted>(principal: Principal, resource: T | undefined, what: string): T {
  if (!resource || !canSee(principal, resource)) throw notFound(what)
  return resource
}

/**
 * A client restricted to a pharmacy or fleet acts only for the people of that tenant, never for
 * another tenant's nor for an administrator (who belongs to none: the token would be unrestricted).
 */
export function clientServes(client: Tenanted, user: Tenanted): boolean {
  if (client.pharmacy_id) return user.pharmacy_id === client.pharmacy_id
  if (client.fleet_id) return user.fleet_id === client.fleet_id
  return true
}
