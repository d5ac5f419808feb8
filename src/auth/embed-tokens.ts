import { SignJWT, decodeProtectedHeader, jwtVerify } from 'jose'
import type { Clock } from '../clock.js'
import type { KeyRing } from './keys.js'

/** The longest embed session (docs/fleet.md, Embedding the dashboard). */
export const MAX_EMBED_TTL_S = 600

// Its own `typ` and audience: an access token is never an embed token, nor the reverse
// (tokens.ts accepts `at+jwt` only; RFC 8725 §3.11 explicit typing).
const EMBED_TYP = 'rxtrace-embed+jwt'

/**
 * Embed sessions: a JWT signed with the service's current signing key (so every instance and
 * every key rotation verifies it through the same JWKS), naming one fleet and nothing else it
 * may do. It grants reading that fleet's live view until it expires.
 */
export class EmbedTokens {
  constructor(
    private readonly keys: KeyRing,
    private readonly issuer: string,
    private readonly clock: Clock,
  ) {}

  private get audience(): string {
    return `${this.issuer}/embed`
  }

  async issue(fleetId: string, ttlS: number): Promise<{ token: string; expiresAtMs: number }> {
    const key = await this.keys.signingKey()
    const nowS = Math.floor(this.clock.now() / 1000)
    const exp = nowS + Math.min(ttlS, MAX_EMBED_TTL_S)
    const token = await new SignJWT({ fleet_id: fleetId, scope: 'dashboard:view' })
      .setProtectedHeader({ alg: 'ES256', typ: EMBED_TYP, kid: key.kid })
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setSubject(fleetId)
      .setIssuedAt(nowS)
      .setExpirationTime(exp)
      .sign(key.privateKey)
    return { token, expiresAtMs: exp * 1000 }
  }

  /** The fleet the token names, or null for an expired, altered or foreign token (the caller shows one error for all). */
  async verify(token: string): Promise<string | null> {
    try {
      const kid = decodeProtectedHeader(token).kid
      const key = kid ? await this.keys.verificationKey(kid) : undefined
      if (!key) return null
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['ES256'],
        typ: EMBED_TYP,
        issuer: this.issuer,
        audience: this.audience,
        currentDate: new Date(this.clock.now()),
        requiredClaims: ['sub', 'exp', 'iat'],
      })
      return typeof payload.fleet_id === 'string' && payload.fleet_id === payload.sub ? payload.fleet_id : null
    } catch {
      return null
    }
  }
}
