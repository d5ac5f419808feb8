/** Every scope a client may hold (docs/api.md, Authentication: Scopes). */
export const allScopes = [
  'pharmacies:read',
  'pharmacies:write',
  'prescriptions:read',
  'prescriptions:write',
  'products:write',
  'deliveries:read',
  'deliveries:write',
  'custody:write',
  'telemetry:read',
  'cold-chain:disposition',
  'webhooks:read',
  'webhooks:write',
  'totes:write',
  'fleet:read',
  'fleet:write',
  'clients:write',
  'audit:read',
] as const

export type Scope = (typeof allScopes)[number]

export const isScope = (s: string): s is Scope => (allScopes as readonly string[]).includes(s)

export function parseScope(text: string | undefined | null): string[] {
  return (text ?? '').split(' ').filter(Boolean)
}

/** Who is calling: the verified access token, reduced to what authorization needs. */
export type Principal = {
  clientId: string
  sub: string
  scopes: ReadonlySet<string>
  pharmacyId: string | null
  fleetId: string | null
  jti: string
  exp: number
  /** A person's token: when the person last entered a password (epoch seconds); what an e-signature without one relies on. */
  authTime?: number
  /** A driver user (role driver) sees only the deliveries assigned to this driver. */
  driverId?: string | null
}
