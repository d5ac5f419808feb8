import { randomUUID, sign } from 'node:crypto'
import { errors as joseErrors, jwtVerify, decodeProtectedHeader } from 'jose'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { AppError } from '../errors.js'
import type { Db } from '../store/schema.js'
import { effectiveScopes } from './authority.js'
import type { KeyRing } from './keys.js'
import { parseScope, type Principal } from './scopes.js'

export type TokenSubject = {
  clientId: string
  sub: string
  scopes: string[]
  pharmacyId: string | null
  fleetId: string | null
  /** Chosen by the caller when it must remember the token to revoke it later (refresh families). */
  jti?: string
  /** A person's token: when the person last entered a password (epoch seconds, OIDC Core §2 `auth_time`, RFC 9470 §3). */
  authTime?: number
}

export type AccessTokenResponse = { access_token: string; token_type: 'Bearer'; expires_in: number; scope: string }

// Verified tokens are remembered until they expire, so a client's steady stream of requests
// costs one ECDSA verification per token rather than one per request.
const VERIFIED_CACHE_LIMIT = 10_000

/** RFC 9068 JWT access tokens: issue, verify, revoke (RFC 7009) and introspect (RFC 7662). */
export class TokenService {
  private readonly verified = new Map<string, Principal>()
  private revoked = new Set<string>()
  private readonly encodedHeaders = new Map<string, string>()

  constructor(
    private readonly db: Db,
    private readonly keys: KeyRing,
    private readonly clock: Clock,
    readonly issuer: string,
    private readonly ttlS: number,
  ) {}

  get audience(): string {
    return `${this.issuer}/v1`
  }

  async issue(subject: TokenSubject): Promise<AccessTokenResponse> {
    const key = await this.keys.signingKey()
    const nowS = Math.floor(this.clock.now() / 1_000)
    const scope = subject.scopes.join(' ')
    const claims: Record<string, unknown> = { client_id: subject.clientId, scope }
    if (subject.pharmacyId) claims.pharmacy_id = subject.pharmacyId
    if (subject.fleetId) claims.fleet_id = subject.fleetId
    if (subject.authTime !== undefined) claims.auth_time = subject.authTime
    const payload = {
      ...claims,
      iss: this.issuer,
      aud: this.audience,
      sub: subject.sub,
      iat: nowS,
      exp: nowS + this.ttlS,
      jti: subject.jti ?? randomUUID(),
    }
    // RFC 7515 compact serialisation; RFC 7518 §3.4: ES256 is the raw r‖s pair (ieee-p1363).
    const signingInput = `${this.encodedHeader(key.kid)}.${base64url(JSON.stringify(payload))}`
    const token = `${signingInput}.${sign('sha256', Buffer.from(signingInput), { key: key.signer, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`
    return { access_token: token, token_type: 'Bearer', expires_in: this.ttlS, scope }
  }

  /** RFC 9068 §2.1 header, the same for every token of a key: encoded once per key. */
  private encodedHeader(kid: string): string {
    let encoded = this.encodedHeaders.get(kid)
    if (encoded === undefined) {
      encoded = base64url(JSON.stringify({ alg: 'ES256', typ: 'at+jwt', kid }))
      this.encodedHeaders.set(kid, encoded)
    }
    return encoded
  }

  /** The caller behind a bearer token, or a 401 that says why. */
  async verify(token: string): Promise<Principal> {
    const cached = this.verified.get(token)
    const nowS = this.clock.now() / 1_000
    if (cached && cached.exp > nowS && !this.revoked.has(cached.jti)) return cached
    if (cached) this.verified.delete(token)
    const principal = await this.verifySignature(token)
    if (this.revoked.has(principal.jti)) throw invalidToken('The access token has been revoked.')
    if (this.verified.size >= VERIFIED_CACHE_LIMIT) this.verified.clear()
    this.verified.set(token, principal)
    return principal
  }

  /** Whether `token` was verified before and is still good: checking it again costs no signature check. */
  knows(token: string): boolean {
    const cached = this.verified.get(token)
    return cached !== undefined && cached.exp > this.clock.now() / 1_000 && !this.revoked.has(cached.jti)
  }

  /** Whether the token with this `jti` was revoked (here, or elsewhere as of the last refresh): long-lived streams check it. */
  isRevoked(jti: string): boolean {
    return this.revoked.has(jti)
  }

  /** Decodes without throwing: what introspection and revocation need. */
  async inspect(token: string): Promise<Principal | null> {
    try {
      return await this.verify(token)
    } catch {
      return null
    }
  }

  async revoke(principal: Pick<Principal, 'jti' | 'exp'>): Promise<void> {
    await this.db
      .insertInto('revoked_tokens')
      .values({ jti: principal.jti, expires_at: iso(principal.exp * 1_000) })
      .onConflict((oc) => oc.column('jti').doNothing())
      .execute()
    this.revoked.add(principal.jti)
  }

  /** Reloads the revocation list (other instances may have revoked tokens) and forgets expired entries. */
  async refreshRevocations(): Promise<void> {
    const now = iso(this.clock.now())
    await this.db.deleteFrom('revoked_tokens').where('expires_at', '<', now).execute()
    const rows = await this.db.selectFrom('revoked_tokens').select('jti').execute()
    this.revoked = new Set(rows.map((r) => r.jti))
  }

  private async verifySignature(token: string): Promise<Principal> {
    let kid: string | undefined
    try {
      kid = decodeProtectedHeader(token).kid
    } catch {
      throw invalidToken('The access token is malformed.')
    }
    const key = kid ? await this.keys.verificationKey(kid) : undefined
    if (!key) throw invalidToken('The access token was signed with an unknown key.')
    try {
      const { payload } = await jwtVerify(token, key, {
        algorithms: ['ES256'], // refuses `none`, HS256 and every other algorithm
        typ: 'at+jwt',
        issuer: this.issuer,
        audience: this.audience,
        currentDate: new Date(this.clock.now()),
        requiredClaims: ['sub', 'client_id', 'jti', 'exp', 'iat'],
      })
      const pharmacyId = typeof payload.pharmacy_id === 'string' ? payload.pharmacy_id : null
      const fleetId = typeof payload.fleet_id === 'string' ? payload.fleet_id : null
      return {
        clientId: String(payload.client_id),
        sub: String(payload.sub),
        // A token signed before a scope was forbidden to its tenant kind does not carry it any more.
        scopes: new Set(
          effectiveScopes({ scopes: parseScope(typeof payload.scope === 'string' ? payload.scope : ''), pharmacyId, fleetId }),
        ),
        pharmacyId,
        fleetId,
        jti: String(payload.jti),
        exp: Number(payload.exp),
        ...(typeof payload.auth_time === 'number' ? { authTime: payload.auth_time } : {}),
      }
    } catch (error) {
      if (error instanceof joseErrors.JWTExpired) throw invalidToken('The access token has expired.')
      if (error instanceof joseErrors.JWTClaimValidationFailed)
        throw invalidToken(`The access token's "${error.claim}" claim is not accepted.`)
      throw invalidToken('The access token signature or header is invalid.')
    }
  }
}

const base64url = (text: string) => Buffer.from(text).toString('base64url')

/** RFC 6750 §3: a bad token names `invalid_token`; no token at all carries no error code. */
export function invalidToken(detail: string): AppError {
  return new AppError(
    'unauthorized',
    detail,
    {},
    {
      'WWW-Authenticate': `Bearer error="invalid_token", error_description="${detail.replace(/"/g, "'")}"`,
    },
  )
}
