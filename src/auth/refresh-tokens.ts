import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret } from '../hashing.js'
import type { Database, Db } from '../store/schema.js'
import type { AuditLog } from './audit-log.js'
import type { TokenService } from './tokens.js'

/** RFC 9700 §4.14.2: a refresh token unused for 24 h expires; a family ends 30 days after sign-in whatever happens. */
export const REFRESH_IDLE_MS = 24 * 3_600_000
export const REFRESH_ABSOLUTE_MS = 30 * 86_400_000

export type RefreshGrant = { familyId: string; clientId: string; userId: string; sessionHash: string; scope: string; familyCreatedAt: string }

export type RotateResult =
  | { ok: true; grant: RefreshGrant }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' | 'wrong_client' }

/**
 * Opaque refresh tokens (256 random bits, stored as SHA-256), grouped in families: the code
 * exchange starts one, and every use rotates it (RFC 9700 §4.14.2). Presenting a token that
 * was already rotated means two parties hold the family: all of it is revoked, with the access
 * tokens it issued, and an audit record says so.
 */
export class RefreshTokens {
  constructor(
    private readonly db: Db, private readonly clock: Clock, private readonly tokens: TokenService, private readonly audit: AuditLog,
  ) {}

  newFamilyId = () => `rf_${randomBytes(16).toString('hex')}`

  /** Stores a new member of a family; returns the token to hand out. */
  async add(grant: RefreshGrant, access: { jti: string; expiresAtMs: number }): Promise<string> {
    const token = `rt_${randomBytes(32).toString('base64url')}`
    const now = this.clock.now()
    const absoluteEnd = Date.parse(grant.familyCreatedAt) + REFRESH_ABSOLUTE_MS
    await this.db.insertInto('refresh_tokens').values({
      token_hash: hashSecret(token), family_id: grant.familyId, client_id: grant.clientId, user_id: grant.userId,
      session_hash: grant.sessionHash, scope: grant.scope, family_created_at: grant.familyCreatedAt, created_at: iso(now),
      expires_at: iso(Math.min(now + REFRESH_IDLE_MS, absoluteEnd)), access_jti: access.jti, access_expires_at: iso(access.expiresAtMs),
      rotated_at: null, revoked_at: null,
    }).execute()
    return token
  }

  /** Spends a presented token (it can never be used again) and says which grant it continues. */
  async rotate(token: string, clientId: string, requestId: string): Promise<RotateResult> {
    const row = await this.db.selectFrom('refresh_tokens').selectAll().where('token_hash', '=', hashSecret(token)).executeTakeFirst()
    if (!row) return { ok: false, reason: 'unknown' }
    // RFC 6749 §10.4: the token is bound to the client it was issued to.
    if (row.client_id !== clientId) return { ok: false, reason: 'wrong_client' }
    if (row.revoked_at) return { ok: false, reason: 'revoked' }
    if (row.rotated_at) {
      await this.revokeFamily(row.family_id)
      this.audit.record({ jti: null, client_id: clientId, sub: row.user_id, method: 'POST', path: `/oauth/token refresh_token reused: family ${row.family_id} revoked`, status: 400, request_id: requestId })
      return { ok: false, reason: 'reused' }
    }
    if (row.expires_at <= iso(this.clock.now())) return { ok: false, reason: 'expired' }
    const spent = await this.db.updateTable('refresh_tokens').set({ rotated_at: iso(this.clock.now()) })
      .where('token_hash', '=', row.token_hash).where('rotated_at', 'is', null).executeTakeFirst()
    if (Number(spent.numUpdatedRows) !== 1) return this.rotate(token, clientId, requestId) // lost a race: now it counts as reuse
    return { ok: true, grant: grantOf(row) }
  }

  async revokeFamily(familyId: string): Promise<void> {
    await this.revokeWhere('family_id', familyId)
  }

  async revokeForSession(sessionHash: string): Promise<void> {
    await this.revokeWhere('session_hash', sessionHash)
  }

  async revokeForUser(userId: string): Promise<void> {
    await this.revokeWhere('user_id', userId)
  }

  /** Revokes the matching families' refresh tokens and every access token they issued that is still live. */
  private async revokeWhere(column: 'family_id' | 'session_hash' | 'user_id', value: string): Promise<void> {
    const now = iso(this.clock.now())
    const rows = await this.db.selectFrom('refresh_tokens').select(['access_jti', 'access_expires_at']).where(column, '=', value).where('access_expires_at', '>', now).execute()
    await this.db.updateTable('refresh_tokens').set({ revoked_at: now }).where(column, '=', value).where('revoked_at', 'is', null).execute()
    for (const row of rows) await this.tokens.revoke({ jti: row.access_jti, exp: Math.ceil(Date.parse(row.access_expires_at) / 1_000) })
  }
}

function grantOf(row: Database['refresh_tokens']): RefreshGrant {
  return { familyId: row.family_id, clientId: row.client_id, userId: row.user_id, sessionHash: row.session_hash, scope: row.scope, familyCreatedAt: row.family_created_at }
}
