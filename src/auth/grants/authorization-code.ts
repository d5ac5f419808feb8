import { randomUUID } from 'node:crypto'
import { iso } from '../../clock.js'
import { OAuthError } from '../oauth-error.js'
import { parseScope } from '../scopes.js'
import type { Grant } from './types.js'
import { issueForUser, userScopes } from './user-token.js'

// The access token's revocation entry must outlive it; the longest TOKEN_TTL_S is one day.
const LONGEST_ACCESS_TTL_MS = 86_400_000

/**
 * RFC 6749 §4.1.3 with RFC 7636 PKCE: exchange a code for the signed-in user's tokens. The code
 * is spent by its first presentation; a second one fails with invalid_grant and revokes what
 * the first one issued (RFC 6749 §4.1.2, RFC 9700 §4.5).
 */
export const authorizationCode: Grant = {
  grantType: 'authorization_code',
  parameters: ['code', 'redirect_uri', 'code_verifier'],
  async handler(ctx) {
    const { client, params, people, clock, tokens } = ctx
    if (!client.grant_types.includes('authorization_code'))
      throw new OAuthError('unauthorized_client', 'This client may not use authorization_code.')
    if (!params.code) throw new OAuthError('invalid_request', 'Send the code.')
    if (!params.code_verifier) throw new OAuthError('invalid_request', 'Send the code_verifier (PKCE, RFC 7636).')
    const familyId = people.refreshTokens.newFamilyId()
    const jti = randomUUID()
    const redemption = await people.codes.redeem(
      params.code,
      { clientId: client.client_id, redirectUri: params.redirect_uri, verifier: params.code_verifier },
      {
        familyId,
        accessJti: jti,
        accessExpiresAt: iso(clock.now() + LONGEST_ACCESS_TTL_MS),
      },
    )
    if (!redemption.ok) {
      if (redemption.reason === 'reused') {
        const { issued } = redemption
        if (issued.familyId) await people.refreshTokens.revokeFamily(issued.familyId)
        if (issued.accessJti) await tokens.revoke({ jti: issued.accessJti, exp: Math.ceil(Date.parse(issued.accessExpiresAt!) / 1_000) })
        await people.consents.forget(redemption.userId, redemption.clientId) // ask the person again before this app gets more
        throw new OAuthError('invalid_grant', 'The code was already used; what it issued is revoked.')
      }
      throw new OAuthError(
        'invalid_grant',
        'The code is invalid, expired, or was issued for another client, redirect URI or code_verifier.',
      )
    }
    const { code } = redemption
    const user = await people.users.find(code.user_id)
    if (!user || user.disabled) throw new OAuthError('invalid_grant', 'The user can no longer sign in.')
    // The session the code was issued under was ended since (sign-out, a new role): what it granted ends with it.
    if (await people.sessions.ended(code.session_hash)) throw new OAuthError('invalid_grant', 'The sign-in this code came from has ended.')
    // Capped again by the role as it is now: the code recorded what the role allowed a few seconds ago.
    const ceiling = userScopes(undefined, client, user.role)
    const scopes = parseScope(code.scope).filter((s) => ceiling.includes(s))
    const answer = await issueForUser(
      ctx,
      user,
      scopes,
      {
        familyId,
        clientId: client.client_id,
        userId: user.id,
        sessionHash: code.session_hash,
        scope: scopes.join(' '),
        familyCreatedAt: iso(clock.now()),
      },
      jti,
    )
    return answer! // a new family's first token is always stored
  },
}
