import { AppError, notFound, validationFailed } from '../errors.js'
import { parseScope } from './scopes.js'

/**
 * What a party may do: its scopes and the one tenant it is fixed to, if any. A token's principal,
 * a client's registration and (later) a user's role all reduce to this, so one rule compares them.
 */
export type Authority = {
  scopes: Iterable<string> | string
  pharmacyId: string | null
  fleetId: string | null
}

/**
 * Scopes a tenant kind may never hold, whatever it was registered with: a fleet carries the goods,
 * and whether a broken cold chain may still be delivered is the pharmacy's decision.
 */
const forbiddenFor = (a: Pick<Authority, 'pharmacyId' | 'fleetId'>): readonly string[] => (a.fleetId ? ['cold-chain:disposition'] : [])

/**
 * RFC 7591 §2 lets the server choose scopes a registration leaves out; ours are read-only, for
 * the kind of tenant the client is fixed to. Writing, auditing and client management are asked for.
 */
const READ_ONLY: Record<'pharmacy' | 'fleet' | 'unrestricted', readonly string[]> = {
  pharmacy: ['pharmacies:read', 'prescriptions:read', 'deliveries:read', 'telemetry:read'],
  fleet: ['fleet:read', 'deliveries:read', 'telemetry:read'],
  unrestricted: ['pharmacies:read', 'prescriptions:read', 'deliveries:read', 'telemetry:read', 'fleet:read'],
}

const scopeSet = (scopes: Authority['scopes']): Set<string> => new Set(typeof scopes === 'string' ? parseScope(scopes) : scopes)

/** The scopes a party of this tenant may actually use: what it holds, minus what its tenant kind never may. */
export function effectiveScopes(a: Authority): string[] {
  const forbidden = forbiddenFor(a)
  return [...scopeSet(a.scopes)].filter((s) => !forbidden.includes(s))
}

/** Scopes a new registration gets when it names none: read-only ones of its tenant kind. */
export function defaultScopes(tenant: Pick<Authority, 'pharmacyId' | 'fleetId'>): string[] {
  return [...READ_ONLY[tenant.pharmacyId ? 'pharmacy' : tenant.fleetId ? 'fleet' : 'unrestricted']]
}

/** Refuses a registration whose scopes its tenant kind may never hold (422, pointing at `scope`). */
export function assertScopesFitTenant(target: Authority): void {
  const forbidden = forbiddenFor(target)
  const held = [...scopeSet(target.scopes)].filter((s) => forbidden.includes(s))
  if (held.length) throw validationFailed([{ pointer: '/scope', message: `a fleet-restricted client may not hold ${held.join(' ')}` }])
}

/** How far `target` reaches beyond `actor`: a tenant the actor cannot reach, and scopes it does not hold. */
export function powerGap(actor: Authority, target: Authority): { otherTenant: boolean; scopes: string[] } {
  const held = scopeSet(actor.scopes)
  return { otherTenant: !reachesTenant(actor, target), scopes: [...scopeSet(target.scopes)].filter((s) => !held.has(s)) }
}

/**
 * The one rule for acting on an existing client (or user): the actor must reach the target's
 * tenant, and hold every scope the target holds. Another tenant's party answers 404 as if it did
 * not exist; a more powerful one of the actor's own tenant, 403. Every route that reads, changes,
 * rotates or disables a client runs it; creation runs `powerGap` with field-level answers.
 */
export function assertNotMorePowerful(actor: Authority, target: Authority, what = 'client'): void {
  const gap = powerGap(actor, target)
  if (gap.otherTenant) throw notFound(what)
  if (gap.scopes.length) {
    throw new AppError('insufficient_scope', `This ${what} holds scopes this token does not: ${gap.scopes.join(' ')}.`, {
      required_scope: gap.scopes.join(' '),
    })
  }
}

/** Whether `actor` may see and act on parties fixed to `target`'s tenant. */
function reachesTenant(actor: Pick<Authority, 'pharmacyId' | 'fleetId'>, target: Pick<Authority, 'pharmacyId' | 'fleetId'>): boolean {
  if (actor.pharmacyId) return target.pharmacyId === actor.pharmacyId && !target.fleetId
  if (actor.fleetId) return target.fleetId === actor.fleetId && !target.pharmacyId
  return true
}
