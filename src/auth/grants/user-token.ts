import { randomUUID } from 'node:crypto'
import type { ClientRecord } from '../clients.js'
import type { RefreshGrant } from '../refresh-tokens.js'
import { OAuthError } from '../oauth-error.js'
import { roleScopes } from '../roles.js'
import { parseScope } from '../scopes.js'
import { clientServes } from '../tenancy.js'
import type { User } from '../users.js'
import type { GrantContext, TokenAnswer } from './types.js'

/** A user token's scopes: what was asked (or everything), capped by the client's and the role's. */
export function userScopes(requested: string | undefined, client: ClientRecord, role: string): string[] {
  const clientScopes = parseScope(client.scope)
  const ceiling = roleScopes(role)
  const asked = requested ? parseScope(requested) : clientScopes
  return asked.filter((s) => clientScopes.includes(s) && ceiling.includes(s))
}

/** Stores the family's next refresh token; null when the store refused it (a rotation that lost a race). */
export type StoreRefresh = (grant: RefreshGrant, access: { jti: string; expiresAtMs: number }) => Promise<string | null>

/**
 * The answer to a code exchange or a refresh: an RFC 9068 access token whose `sub` is the user
 * and whose tenant claim is the user's, plus the family's next refresh token when the client
 * may refresh. The access token is signed before anything is stored, so the store's write (one
 * transaction for a rotation) never waits on the signature; it is handed out only once stored.
 * Null when `store` refused.
 */
export async function issueForUser(
  ctx: GrantContext,
  user: User,
  scopes: string[],
  grant: RefreshGrant,
  jti: string = randomUUID(),
  store?: StoreRefresh,
): Promise<TokenAnswer | null> {
  // The one place a user token is minted: a restricted client never gets one for another tenant's person.
  if (!clientServes(ctx.client, user))
    throw new OAuthError('invalid_grant', 'This client is restricted to another pharmacy or fleet than the user’s.')
  const access = await ctx.tokens.issue({
    clientId: ctx.client.client_id,
    sub: user.id,
    scopes,
    pharmacyId: user.pharmacy_id,
    fleetId: user.fleet_id,
    jti,
    authTime: await ctx.people.sessions.authTimeOf(grant.sessionHash),
  })
  // The family row exists even for a client that may not refresh: it is how this access token is found to revoke.
  const next = { ...grant, scope: scopes.join(' ') }
  const accessRecord = { jti, expiresAtMs: ctx.clock.now() + access.expires_in * 1_000 }
  const refresh = store ? await store(next, accessRecord) : await ctx.people.refreshTokens.add(next, accessRecord)
  if (refresh === null) return null
  return ctx.client.grant_types.includes('refresh_token') ? { ...access, refresh_token: refresh } : access
}
