import { OAuthError } from '../oauth-error.js'
import { parseScope } from '../scopes.js'
import { clientServes } from '../tenancy.js'
import type { Grant } from './types.js'
import { issueForUser, userScopes } from './user-token.js'

/**
 * RFC 6749 §6 with rotation (RFC 9700 §4.14.2): every use spends the presented refresh token
 * and hands out the family's next one. A spent token presented again revokes the family.
 */
export const refreshToken: Grant = {
  grantType: 'refresh_token',
  parameters: ['refresh_token', 'scope'],
  async handler(ctx) {
    const { client, params, people, requestId } = ctx
    if (!client.grant_types.includes('refresh_token')) throw new OAuthError('unauthorized_client', 'This client may not use refresh_token.')
    if (!params.refresh_token) throw new OAuthError('invalid_request', 'Send the refresh_token.')
    const presented = await people.refreshTokens.present(params.refresh_token, client.client_id, requestId)
    if (!presented.ok) throw refused(presented.reason)
    const { grant, user, tokenHash } = presented
    if (!user || user.disabled) {
      await people.refreshTokens.revokeFamily(grant.familyId)
      throw new OAuthError('invalid_grant', 'The user can no longer sign in.')
    }
    // A family this client should never have had (another tenant's person): ended, not refused once.
    if (!clientServes(client, user)) {
      await people.refreshTokens.revokeFamily(grant.familyId)
      throw new OAuthError('invalid_grant', 'This client is restricted to another pharmacy or fleet than the user’s.')
    }
    // RFC 6749 §6: a refresh may narrow the scope, never widen it; the role and client may have narrowed it since.
    const original = parseScope(grant.scope)
    if (params.scope && !parseScope(params.scope).every((s) => original.includes(s))) {
      throw new OAuthError('invalid_scope', 'A refresh cannot ask for more than the original grant.')
    }
    const scopes = userScopes(params.scope ?? grant.scope, client, user.role).filter((s) => original.includes(s))
    // Spending the presented token and storing the next one are one transaction.
    const answer = await issueForUser(ctx, user, scopes, grant, undefined, (next, access) =>
      people.refreshTokens.rotate(tokenHash, next, access),
    )
    if (answer) return answer
    // Another request spent it first: presenting it again is a replay, which revokes the family.
    const again = await people.refreshTokens.present(params.refresh_token, client.client_id, requestId)
    throw refused(again.ok ? 'revoked' : again.reason)
  },
}

function refused(reason: 'unknown' | 'expired' | 'revoked' | 'reused' | 'wrong_client'): OAuthError {
  return new OAuthError(
    'invalid_grant',
    reason === 'reused'
      ? 'The refresh token was already used; every token of its family is revoked.'
      : 'The refresh token is invalid, expired or revoked.',
  )
}
