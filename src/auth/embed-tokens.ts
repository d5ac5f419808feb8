import type { Clock } from '../clock.js'
import type { KeyRing } from './keys.js'
import { signPurposeToken, verifyPurposeToken, type Purpose } from './purpose-tokens.js'

/** The longest embed session (docs/fleet.md, Embedding the dashboard). */
export const MAX_EMBED_TTL_S = 600

/**
 * Embed sessions: a signed token naming one fleet and nothing else it may do. It grants reading
 * that fleet's live view until it expires.
 */
export class EmbedTokens {
  private readonly purpose: Purpose

  constructor(
    private readonly keys: KeyRing,
    issuer: string,
    private readonly clock: Clock,
  ) {
    this.purpose = { typ: 'rxtrace-embed+jwt', issuer, audience: `${issuer}/embed` }
  }

  async issue(fleetId: string, ttlS: number): Promise<{ token: string; expiresAtMs: number }> {
    const nowS = Math.floor(this.clock.now() / 1000)
    const exp = nowS + Math.min(ttlS, MAX_EMBED_TTL_S)
    const token = await signPurposeToken(await this.keys.signingKey(), this.purpose, {
      claims: { fleet_id: fleetId, scope: 'dashboard:view' },
      subject: fleetId,
      issuedAtS: nowS,
      expiresAtS: exp,
    })
    return { token, expiresAtMs: exp * 1000 }
  }

  /** The fleet the token names, or null for an expired, altered or foreign token (the caller shows one error for all). */
  async verify(token: string): Promise<string | null> {
    const verdict = await verifyPurposeToken(this.keys, token, this.purpose, this.clock.now(), ['sub', 'exp', 'iat'])
    if (!verdict.ok) return null
    const { fleet_id, sub } = verdict.payload
    return typeof fleet_id === 'string' && fleet_id === sub ? fleet_id : null
  }
}
