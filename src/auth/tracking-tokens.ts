import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import type { KeyRing } from './keys.js'
import { signPurposeToken, verifyPurposeToken, type Purpose } from './purpose-tokens.js'

/**
 * The longest a tracking link works, open delivery or not (docs/api.md, Tracking links): a
 * week covers a delivery queued over a weekend and a reattempt; the service also refuses a link
 * 24 h after its delivery ended, whichever comes first.
 */
const MAX_TRACKING_LINK_S = 7 * 86_400

/** What a link's token says, once its signature held: the delivery, and the link's own id (what its rate limit counts). */
export type TrackingClaims = { deliveryId: string; linkId: string; expiresAtMs: number }

/** `expired`: intact but past its `exp`; `invalid`: altered, foreign, or not a token at all. */
export type TrackingVerdict = { ok: true; claims: TrackingClaims } | { ok: false; reason: 'expired' | 'invalid' }

/**
 * Patient tracking links: a signed token (purpose-tokens.ts, like the embed sessions) naming one
 * delivery and nothing else. Nothing is stored: the URL carries its own signature and expiry.
 */
export class TrackingTokens {
  private readonly purpose: Purpose

  constructor(
    private readonly keys: KeyRing,
    private readonly issuer: string,
    private readonly clock: Clock,
  ) {
    this.purpose = { typ: 'rxtrace-track+jwt', issuer, audience: `${issuer}/track` }
  }

  /**
   * The patient's URL; `notAfterMs` (the delivery's end + 24 h, if it has ended) caps the week.
   * Signs with the key as loaded, reading nothing: links are signed inside the transactions of
   * the moves that announce them (src/services/patient-notices.ts).
   */
  async issue(deliveryId: string, notAfterMs?: number): Promise<{ url: string; expiresAtMs: number }> {
    const nowS = Math.floor(this.clock.now() / 1000)
    const exp = Math.min(nowS + MAX_TRACKING_LINK_S, notAfterMs === undefined ? Infinity : Math.floor(notAfterMs / 1000))
    const token = await signPurposeToken(this.keys.loadedSigningKey(), this.purpose, {
      claims: { delivery_id: deliveryId },
      subject: deliveryId,
      issuedAtS: nowS,
      expiresAtS: exp,
      // 96 bits: the link's id, so a link (not a delivery) is what its rate limit counts.
      id: randomBytes(12).toString('base64url'),
    })
    return { url: `${this.issuer}/track?token=${token}`, expiresAtMs: exp * 1000 }
  }

  async verify(token: string): Promise<TrackingVerdict> {
    const verdict = await verifyPurposeToken(this.keys, token, this.purpose, this.clock.now(), ['sub', 'exp', 'iat', 'jti'])
    if (!verdict.ok) return verdict
    const { delivery_id, sub, jti, exp } = verdict.payload
    if (typeof delivery_id !== 'string' || delivery_id !== sub) return { ok: false, reason: 'invalid' }
    return { ok: true, claims: { deliveryId: delivery_id, linkId: jti!, expiresAtMs: exp! * 1000 } }
  }
}
