import { allScopes } from './scopes.js'

/**
 * What a person may do: each role is a ceiling on the scopes of that person's tokens and is
 * fixed to one kind of tenant. A user token carries the intersection of what the app asked
 * for, the client's scopes and these. `cold-chain:disposition` is a pharmacy's decision: no
 * fleet role holds it.
 */
export const roles = {
  pharmacist: {
    tenant: 'pharmacy',
    scopes: [
      'pharmacies:read',
      'prescriptions:read',
      'prescriptions:write',
      'products:write',
      'deliveries:read',
      'deliveries:write',
      'custody:write',
      'telemetry:read',
      'cold-chain:disposition',
      'webhooks:read',
      'audit:read',
    ],
  },
  technician: {
    tenant: 'pharmacy',
    scopes: ['pharmacies:read', 'prescriptions:read', 'prescriptions:write', 'deliveries:read', 'custody:write', 'telemetry:read'],
  },
  dispatcher: { tenant: 'fleet', scopes: ['fleet:read', 'deliveries:read', 'deliveries:write', 'custody:write', 'telemetry:read'] },
  /** Sees only the deliveries assigned to the user's `driver_id`. */
  driver: { tenant: 'fleet', scopes: ['deliveries:read', 'custody:write', 'telemetry:read'] },
  fleet_admin: {
    tenant: 'fleet',
    scopes: ['fleet:read', 'fleet:write', 'deliveries:read', 'telemetry:read', 'webhooks:read', 'webhooks:write'],
  },
  admin: { tenant: 'none', scopes: [...allScopes] },
} as const satisfies Record<string, { tenant: 'pharmacy' | 'fleet' | 'none'; scopes: readonly string[] }>

export type Role = keyof typeof roles
export const roleNames = Object.keys(roles) as Role[]
export const isRole = (name: string): name is Role => name in roles
export const roleScopes = (role: string): readonly string[] => (isRole(role) ? roles[role].scopes : [])

/** Plain words for the consent page: what the app could do on the person's behalf. */
export const scopeWords: Record<string, string> = {
  'pharmacies:read': 'See your pharmacy’s details',
  'pharmacies:write': 'Register and change pharmacies',
  'prescriptions:read': 'See prescriptions queued for delivery',
  'prescriptions:write': 'Queue prescriptions for delivery',
  'products:write': 'Register products and their stability data',
  'deliveries:read': 'See deliveries and their chain of custody',
  'deliveries:write': 'Dispatch, cancel and complete deliveries',
  'custody:write': 'Sign hand-overs of packages in your name',
  'telemetry:read': 'See temperature readings of deliveries',
  'cold-chain:disposition': 'Decide whether a package whose cold chain broke is released or returned',
  'webhooks:read': 'See webhook endpoints',
  'webhooks:write': 'Add and change webhook endpoints',
  'totes:write': 'Register totes',
  'fleet:read': 'See your fleet and its drivers',
  'fleet:write': 'Change your fleet and its drivers',
  'clients:write': 'Manage apps and user accounts',
  'audit:read': 'Read the audit log',
}
