import { grantableScopes } from '../clients.js'
import { OAuthError } from '../oauth-error.js'
import type { Grant } from './types.js'

/** RFC 6749 §4.4: a confidential client acting for itself. */
export const clientCredentials: Grant = {
  grantType: 'client_credentials',
  parameters: ['scope'],
  async handler({ client, params, tokens }) {
    // A public client has no secret to prove who it is, so it never acts for itself (RFC 6749 §4.4).
    if (client.token_endpoint_auth_method === 'none')
      throw new OAuthError('unauthorized_client', 'A public client may not use client_credentials.')
    if (!client.grant_types.includes('client_credentials'))
      throw new OAuthError('unauthorized_client', 'This client may not use client_credentials.')
    const scopes = grantableScopes(client, params.scope)
    if (!scopes) throw new OAuthError('invalid_scope', 'The client is not allowed every requested scope.')
    return tokens.issue({
      clientId: client.client_id,
      sub: client.client_id,
      scopes,
      pharmacyId: client.pharmacy_id,
      fleetId: client.fleet_id,
    })
  },
}
