import { randomBytes } from 'node:crypto'
import { SignJWT, decodeProtectedHeader, errors, jwtVerify } from 'jose'
import type { Clock } from '../clock.js'
import type { KeyRing } from './keys.js'

/**
 * The longest a tracking link works, open delivery or not (docs/api.md, Tracking links): a
 * week covers a delivery queued over a weekend and a reattempt; the service also refuses a link
 * 24 h after its delivery ended, whichever comes first.
 */
const MAX_TRACKING_LINK_S = 7 * 86_400

// Its own `typ` and audience: neither an access token nor an embed token is a tracking token,
// nor the reverse (RFC 8725 §3.11 explicit typing).
const TRACKING_TYP = 'rxtrace-track+jwt'

/** What a link's token says, once its signature held: the delivery, and the link's own id (what its rate limit counts). */
export type TrackingClaims = { deliveryId: string; linkId: string; expiresAtMs: number }

/** `expired`: intact but past its `exp`; `invalid`: altered, foreign, or not a token at all. */
export type TrackingVerdict = { ok: true; claims: TrackingClaims } | { ok: false; reason: 'expired' | 'invalid' }

/**
 * Patient tracking links: a JWT signed with the service's current signing key (like the embed
 * sessions, so every instance and key rotation verifies it through the same JWKS), naming one
 * delivery and nothing else. Nothing is stored: the URL carries its own signature and expiry.
 */
export class TrackingTokens {
  constructor(
    private readonly keys: KeyRing,
    private readonly issuer: string,
    private readonly clock: Clock,
  ) {}

  private get audience(): string {
    return `${this.issuer}/track`
  }

  /**
   * The patient's URL; `notAfterMs` (the delivery's end + 24 h, if it has ended) caps the week.
   * Signs with the key as loaded, reading nothing: links are signed inside the transactions of
   * the moves that announce them (src/services/patient-notices.ts).
   */
  async issue(deliveryId: string, notAfterMs?: number): Promise<{ url: string; expiresAtMs: number }> {
    const key = this.keys.loadedSigningKey()
    const nowS = Math.floor(this.clock.now() / 1000)
    const exp = Math.min(nowS + MAX_TRACKING_LINK_S, notAfterMs === undefined ? Infinity : Math.floor(notAfterMs / 1000))
    // 96 bits: the link's id, so a link (not a delivery) is what its rate limit counts.
    const token = await new SignJWT({ delivery_id: deliveryId })
      .setProtectedHeader({ alg: 'ES256', typ: TRACKING_TYP, kid: key.kid })
      .setIssuer(this.issuer)
      .setAudience(this.audience)
      .setSubject(deliveryId)
      .setJti(randomBytes(12).toString('base64url'))
      .setIssuedAt(nowS)
      .setExpirationTime(exp)
      .sign(key.privateKey)
    return { url: `${this.issuer}/track?token=${token}`, expiresAtMs: exp * 1000 }
  }

  async verify(token: string): Promise<TrackingVerdict> {
    try {
      const kid = decodeProtectedHeader(token).kid
      const key = kid ? await this.keys.verificationKey(kid) : undefined
      if (!key) return { ok: false, reason: 'invalid' }
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['ES256'],
        typ: TRACKING_TYP,
        issuer: this.issuer,
        audience: this.audience,
        currentDate: new Date(this.clock.now()),
        requiredClaims: ['sub', 'exp', 'iat', 'jti'],
      })
      if (typeof payload.delivery_id !== 'string' || payload.delivery_id !== payload.sub) return { ok: false, reason: 'invalid' }
      return { ok: true, claims: { deliveryId: payload.delivery_id, linkId: payload.jti!, expiresAtMs: payload.exp! * 1000 } }
    } catch (error) {
      // Only a token whose signature held can be "expired"; jose checks the signature before the claims.
      return { ok: false, reason: error instanceof errors.JWTExpired ? 'expired' : 'invalid' }
    }
  }
}
