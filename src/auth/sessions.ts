import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret } from '../hashing.js'
import type { Db } from '../store/schema.js'

/** A browser session ends after 8 hours without use. */
const SESSION_IDLE_MS = 8 * 3_600_000
// last_seen_at is written at most this often, so a busy session does not write on every page.
const TOUCH_EVERY_MS = 60_000

/** `authTime`: when its person entered a password, epoch seconds. */
export type Session = { idHash: string; userId: string; authTime: number }

/**
 * Sign-in sessions of the authorization server's pages. The browser holds a random 256-bit id
 * in an HttpOnly cookie; the table holds its SHA-256 only. Every sign-in starts a new session
 * with a new id, so an id planted before sign-in is worthless (no session fixation).
 */
export class SessionStore {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async start(userId: string): Promise<{ cookieValue: string; session: Session }> {
    const cookieValue = randomBytes(32).toString('base64url')
    const now = iso(this.clock.now())
    const idHash = hashSecret(cookieValue)
    await this.db
      .insertInto('user_sessions')
      .values({ id_hash: idHash, user_id: userId, created_at: now, last_seen_at: now, ended_at: null })
      .execute()
    return { cookieValue, session: { idHash, userId, authTime: Math.floor(Date.parse(now) / 1_000) } }
  }

  /** The live session behind a cookie value: not ended, used within the idle limit, its user active. */
  async resume(cookieValue: string | undefined): Promise<Session | null> {
    if (!cookieValue) return null
    const idHash = hashSecret(cookieValue)
    const row = await this.db
      .selectFrom('user_sessions')
      .innerJoin('users', 'users.id', 'user_sessions.user_id')
      .select([
        'user_sessions.user_id',
        'user_sessions.created_at',
        'user_sessions.last_seen_at',
        'user_sessions.ended_at',
        'users.disabled',
      ])
      .where('user_sessions.id_hash', '=', idHash)
      .executeTakeFirst()
    const now = this.clock.now()
    if (!row || row.ended_at || row.disabled || Date.parse(row.last_seen_at) + SESSION_IDLE_MS <= now) return null
    if (Date.parse(row.last_seen_at) + TOUCH_EVERY_MS <= now) {
      await this.db
        .updateTable('user_sessions')
        .set({ last_seen_at: iso(now) })
        .where('id_hash', '=', idHash)
        .execute()
    }
    return { idHash, userId: row.user_id, authTime: Math.floor(Date.parse(row.created_at) / 1_000) }
  }

  /**
   * When the session's person entered a password (epoch seconds): every sign-in starts a new
   * session, so its creation is the `auth_time` of every token issued under it, refreshes
   * included; a refresh never makes a sign-in more recent (RFC 9470 step-up needs a new one).
   */
  async authTimeOf(idHash: string): Promise<number | undefined> {
    const row = await this.db.selectFrom('user_sessions').select('created_at').where('id_hash', '=', idHash).executeTakeFirst()
    return row ? Math.floor(Date.parse(row.created_at) / 1_000) : undefined
  }

  /** Whether the session was ended (signed out, or its user disabled or given a new role): its codes are spoiled. */
  async ended(idHash: string): Promise<boolean> {
    const row = await this.db.selectFrom('user_sessions').select('ended_at').where('id_hash', '=', idHash).executeTakeFirst()
    return !row || row.ended_at !== null
  }

  async end(idHash: string): Promise<void> {
    await this.db
      .updateTable('user_sessions')
      .set({ ended_at: iso(this.clock.now()) })
      .where('id_hash', '=', idHash)
      .where('ended_at', 'is', null)
      .execute()
  }

  async endAllOf(userId: string): Promise<void> {
    await this.db
      .updateTable('user_sessions')
      .set({ ended_at: iso(this.clock.now()) })
      .where('user_id', '=', userId)
      .where('ended_at', 'is', null)
      .execute()
  }
}
