import { randomUUID } from 'node:crypto'
import type { ClientRecord } from '../clients.js'
import type { RefreshGrant } from '../refresh-tokens.js'
import { roleScopes } from '../roles.js'
import { parseScope } from '../scopes.js'
import type { User } from '../users.js'
import type { GrantContext, TokenAnswer } from './types.js'

/** A user token's scopes: what was asked (or everything), capped by the client's and the role's. */
export function userScopes(requested: string | undefined, client: ClientRecord, role: string): string[] {
  const clientScopes = parseScope(client.scope)
  const ceiling = roleScopes(role)
  const asked = requested ? parseScope(requested) : clientScopes
  return asked.filter((s) => clientScopes.includes(s) && ceiling.includes(s))
}

/**
 * The answer to a code exchange or a refresh: an RFC 9068 access token whose `sub` is the user
 * and whose tenant claim is the user's, plus the family's next refresh token when the client
 * may refresh.
 */
export async function issueForUser(ctx: GrantContext, user: User, scopes: string[], grant: RefreshGrant, jti: string = randomUUID()): Promise<TokenAnswer> {
  const access = await ctx.tokens.issue({ clientId: ctx.client.client_id, sub: user.id, scopes, pharmacyId: user.pharmacy_id, fleetId: user.fleet_id, jti })
  // The family row exists even for a client that may not refresh: it is how this access token is found to revoke.
  const refresh = await ctx.people.refreshTokens.add({ ...grant, scope: scopes.join(' ') }, { jti, expiresAtMs: ctx.clock.now() + access.expires_in * 1_000 })
  return ctx.client.grant_types.includes('refresh_token') ? { ...access, refresh_token: refresh } : access
}
