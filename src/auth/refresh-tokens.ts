import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret } from '../hashing.js'
import { insertRow, precompiled } from '../store/precompiled.js'
import type { Database, Db } from '../store/schema.js'
import type { AuditLog } from './audit-log.js'
import { randomToken } from './random-token.js'
import type { ConsentStore } from './consents.js'
import type { Role } from './roles.js'
import type { TokenService } from './tokens.js'
import type { User } from './users.js'

/** RFC 9700 §4.14.2: a refresh token unused for 24 h expires; a family ends 30 days after sign-in whatever happens. */
const REFRESH_IDLE_MS = 24 * 3_600_000
const REFRESH_ABSOLUTE_MS = 30 * 86_400_000

/** Every refresh token starts so; an access token is a JWT and never does. */
export const REFRESH_TOKEN_PREFIX = 'rt_'

export type RefreshGrant = {
  familyId: string
  clientId: string
  userId: string
  sessionHash: string
  scope: string
  familyCreatedAt: string
}

export type Presented =
  | { ok: true; grant: RefreshGrant; user: User | null; tokenHash: string }
  | { ok: false; reason: 'unknown' | 'expired' | 'revoked' | 'reused' | 'wrong_client' }

/**
 * Opaque refresh tokens (256 random bits, stored as SHA-256), grouped in families: the code
 * exchange starts one, and every use rotates it (RFC 9700 §4.14.2). Presenting a token that
 * was already rotated means two parties hold the family: all of it is revoked, with the access
 * tokens it issued, and an audit record says so.
 */
export class RefreshTokens {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly tokens: TokenService,
    private readonly audit: AuditLog,
    private readonly consents: ConsentStore,
  ) {}

  newFamilyId = () => `rf_${randomBytes(16).toString('hex')}`

  /** Stores a new member of a family; returns the token to hand out. */
  async add(grant: RefreshGrant, access: { jti: string; expiresAtMs: number }): Promise<string> {
    const { token, row } = this.newRow(grant, access, this.clock.now())
    await this.db.insertInto('refresh_tokens').values(row).execute()
    return token
  }

  /**
   * What a presented token continues, checked but not yet spent: the grant, its user as stored
   * now (read in the same query), and the token's hash to spend with `rotate`. A token already
   * rotated means it was replayed: its family is revoked here, with an audit record.
   */
  async present(token: string, clientId: string, requestId: string): Promise<Presented> {
    const tokenHash = hashSecret(token)
    const [row] = await presentedRow(this.db, tokenHash)
    if (!row) return { ok: false, reason: 'unknown' }
    // RFC 6749 §10.4: the token is bound to the client it was issued to.
    if (row.client_id !== clientId) return { ok: false, reason: 'wrong_client' }
    if (row.revoked_at) return { ok: false, reason: 'revoked' }
    if (row.rotated_at) {
      // Two parties hold the family: revoke it, and ask the person again before this app gets more.
      await this.revokeFamily(row.family_id)
      await this.consents.forget(row.user_id, row.client_id)
      // A change (the family revoked): its record is committed before the answer, as every write's.
      await this.audit.commit({
        jti: null,
        client_id: clientId,
        sub: row.user_id,
        pharmacy_id: row.u_pharmacy_id, // the person's tenant reads it, as it reads their requests
        fleet_id: row.u_fleet_id,
        method: 'POST',
        path: `/oauth/token refresh_token reused: family ${row.family_id} revoked`,
        status: 400,
        request_id: requestId,
      })
      return { ok: false, reason: 'reused' }
    }
    if (row.expires_at <= iso(this.clock.now())) return { ok: false, reason: 'expired' }
    const user: User | null =
      row.u_id === null
        ? null
        : {
            id: row.u_id,
            email: row.u_email!,
            name: row.u_name!,
            role: row.u_role! as Role,
            pharmacy_id: row.u_pharmacy_id,
            fleet_id: row.u_fleet_id,
            driver_id: row.u_driver_id,
            disabled: !!row.u_disabled,
            created_at: row.u_created_at!,
          }
    return { ok: true, grant: grantOf(row), user, tokenHash }
  }

  /**
   * Spends the presented token (by its hash, from `present`) and stores the family's next one,
   * in one transaction: a crash between the two can neither lose the family nor leave the old
   * token usable beside the new one. Answers the new token, or null when another request spent
   * the old one first (it then counts as a replay: present it again to revoke the family).
   */
  async rotate(spentHash: string, next: RefreshGrant, access: { jti: string; expiresAtMs: number }): Promise<string | null> {
    const now = this.clock.now()
    const { token, row } = this.newRow(next, access, now)
    const spent = await this.db.transaction().execute(async (trx) => {
      if ((await spend(trx, spentHash, iso(now))).length !== 1) return false
      await insertRow(trx, 'refresh_tokens', row)
      return true
    })
    return spent ? token : null
  }

  /** A new member of a family: the token to hand out (256 random bits) and the row that stores only its SHA-256. */
  private newRow(
    grant: RefreshGrant,
    access: { jti: string; expiresAtMs: number },
    now: number,
  ): { token: string; row: Database['refresh_tokens'] } {
    const token = `${REFRESH_TOKEN_PREFIX}${randomToken(32)}`
    const absoluteEnd = Date.parse(grant.familyCreatedAt) + REFRESH_ABSOLUTE_MS
    return {
      token,
      row: {
        token_hash: hashSecret(token),
        family_id: grant.familyId,
        client_id: grant.clientId,
        user_id: grant.userId,
        session_hash: grant.sessionHash,
        scope: grant.scope,
        family_created_at: grant.familyCreatedAt,
        created_at: iso(now),
        expires_at: iso(Math.min(now + REFRESH_IDLE_MS, absoluteEnd)),
        access_jti: access.jti,
        access_expires_at: iso(access.expiresAtMs),
        rotated_at: null,
        revoked_at: null,
      },
    }
  }

  /**
   * RFC 7009 §2.1: the client revokes a refresh token of its own. We revoke its whole family (every
   * refresh token of the grant and the access tokens they issued), as §2.1 lets the server do: the
   * grant is what the client is giving up. A token of another client, or none, is left alone.
   */
  async revokePresented(token: string, clientId: string): Promise<void> {
    const [row] = await presentedRow(this.db, hashSecret(token))
    if (row && row.client_id === clientId) await this.revokeFamily(row.family_id)
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
    const rows = await this.db
      .selectFrom('refresh_tokens')
      .select(['access_jti', 'access_expires_at'])
      .where(column, '=', value)
      .where('access_expires_at', '>', now)
      .execute()
    await this.db.updateTable('refresh_tokens').set({ revoked_at: now }).where(column, '=', value).where('revoked_at', 'is', null).execute()
    for (const row of rows) await this.tokens.revoke({ jti: row.access_jti, exp: Math.ceil(Date.parse(row.access_expires_at) / 1_000) })
  }
}

// The refresh grant's queries, compiled once (src/store/precompiled.ts): a grant runs three.
const presentedRow = precompiled((db, tokenHash: string) =>
  db
    .selectFrom('refresh_tokens')
    .leftJoin('users', 'users.id', 'refresh_tokens.user_id')
    .selectAll('refresh_tokens')
    .select([
      'users.id as u_id',
      'users.email as u_email',
      'users.name as u_name',
      'users.role as u_role',
      'users.pharmacy_id as u_pharmacy_id',
      'users.fleet_id as u_fleet_id',
      'users.driver_id as u_driver_id',
      'users.disabled as u_disabled',
      'users.created_at as u_created_at',
    ])
    .where('refresh_tokens.token_hash', '=', tokenHash),
)
/** Spends a token still unrotated and unrevoked; answers its hash when it did. */
const spend = precompiled((db, tokenHash: string, now: string) =>
  db
    .updateTable('refresh_tokens')
    .set({ rotated_at: now })
    .where('token_hash', '=', tokenHash)
    .where('rotated_at', 'is', null)
    .where('revoked_at', 'is', null)
    .returning('token_hash'),
)

function grantOf(row: Database['refresh_tokens']): RefreshGrant {
  return {
    familyId: row.family_id,
    clientId: row.client_id,
    userId: row.user_id,
    sessionHash: row.session_hash,
    scope: row.scope,
    familyCreatedAt: row.family_created_at,
  }
}
