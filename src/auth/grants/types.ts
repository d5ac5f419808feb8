import type { Clock } from '../../clock.js'
import type { ClientRecord } from '../clients.js'
import type { People } from '../people.js'
import type { AccessTokenResponse, TokenService } from '../tokens.js'

/** The token request's form parameters (RFC 6749 §4.1.3, §4.4.2, §6). */
export type TokenParams = Partial<Record<'grant_type' | 'scope' | 'code' | 'redirect_uri' | 'code_verifier' | 'refresh_token', string>>

export type GrantContext = {
  client: ClientRecord
  params: TokenParams
  requestId: string
  tokens: TokenService
  people: People
  clock: Clock
}

export type TokenAnswer = AccessTokenResponse & { refresh_token?: string }

/**
 * One grant type, as node-oidc-provider registers them: its name, the parameters it reads and
 * a handler that answers a token or throws an OAuthError. The client is already authenticated.
 */
export type Grant = {
  grantType: string
  parameters: readonly (keyof TokenParams)[]
  handler(ctx: GrantContext): Promise<TokenAnswer>
}
