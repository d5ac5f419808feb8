import { SignJWT, decodeProtectedHeader, errors, jwtVerify, type CryptoKey, type JWTPayload } from 'jose'
import type { KeyRing } from './keys.js'

/**
 * A token for one purpose only (an embed session, a tracking link): its own `typ` and audience,
 * so no access token is one of these, nor the reverse (tokens.ts accepts `at+jwt` only; RFC 8725
 * §3.11 explicit typing). Signed ES256 with the service's current signing key, so every instance
 * and every key rotation verifies it through the same JWKS.
 */
export type Purpose = { typ: string; issuer: string; audience: string }

export function signPurposeToken(
  key: { kid: string; privateKey: CryptoKey },
  purpose: Purpose,
  token: { claims: JWTPayload; subject: string; issuedAtS: number; expiresAtS: number; id?: string },
): Promise<string> {
  const jwt = new SignJWT(token.claims)
    .setProtectedHeader({ alg: 'ES256', typ: purpose.typ, kid: key.kid })
    .setIssuer(purpose.issuer)
    .setAudience(purpose.audience)
    .setSubject(token.subject)
    .setIssuedAt(token.issuedAtS)
    .setExpirationTime(token.expiresAtS)
  if (token.id !== undefined) jwt.setJti(token.id)
  return jwt.sign(key.privateKey)
}

/** The claims of an intact, unexpired token of this purpose; `expired` only for one whose signature held. */
export async function verifyPurposeToken(
  keys: KeyRing,
  token: string,
  purpose: Purpose,
  nowMs: number,
  requiredClaims: string[],
): Promise<{ ok: true; payload: JWTPayload } | { ok: false; reason: 'expired' | 'invalid' }> {
  try {
    const kid = decodeProtectedHeader(token).kid
    const key = kid ? await keys.verificationKey(kid) : undefined
    if (!key) return { ok: false, reason: 'invalid' }
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['ES256'],
      typ: purpose.typ,
      issuer: purpose.issuer,
      audience: purpose.audience,
      currentDate: new Date(nowMs),
      requiredClaims,
    })
    return { ok: true, payload }
  } catch (error) {
    // jose checks the signature before the claims: only an intact token can be "expired".
    return { ok: false, reason: error instanceof errors.JWTExpired ? 'expired' : 'invalid' }
  }
}
