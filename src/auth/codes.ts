import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret, sha256Hex } from '../hashing.js'
import type { Database, Db } from '../store/schema.js'

/** RFC 9700 §4.5 / RFC 6749 §4.1.2: codes live 60 s and are used once. */
const CODE_TTL_MS = 60_000

type CodeRow = Database['authorization_codes']
export type CodeGrant = Omit<CodeRow, 'code_hash' | 'expires_at' | 'used_at' | 'family_id' | 'access_jti' | 'access_expires_at'>
/** What the first use issues, recorded in the same write that spends the code. */
export type Issued = { familyId: string; accessJti: string; accessExpiresAt: string }

export type Redemption =
  | { ok: true; code: CodeRow }
  | { ok: false; reason: 'unknown' | 'expired' | 'mismatch' }
  /** RFC 6749 §4.1.2: a second use; `issued` is what the first use issued, to revoke. */
  | { ok: false; reason: 'reused'; userId: string; clientId: string; issued: Partial<Issued> }

/** RFC 7636 §4.6: S256 only, so the challenge never reveals the verifier. */
const s256 = (verifier: string) => Buffer.from(sha256Hex(verifier), 'hex').toString('base64url')

/** RFC 7636 §4.1: 43–128 characters of the unreserved set; §4.2: an S256 challenge is 43 base64url characters. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/
export const S256_CHALLENGE = /^[A-Za-z0-9\-_]{43}$/

/** Authorization codes, stored as SHA-256 of 256 random bits, each bound to client, redirect URI, challenge and user. */
export class AuthorizationCodes {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async issue(grant: CodeGrant): Promise<string> {
    const code = randomBytes(32).toString('base64url')
    await this.db
      .insertInto('authorization_codes')
      .values({
        ...grant,
        code_hash: hashSecret(code),
        expires_at: iso(this.clock.now() + CODE_TTL_MS),
        used_at: null,
        family_id: null,
        access_jti: null,
        access_expires_at: null,
      })
      .execute()
    return code
  }

  /**
   * Spends a code presented by `clientId` with `redirectUri` and `verifier`. The first
   * presentation spends it even when a binding then fails: a code is never tried twice.
   */
  async redeem(
    code: string,
    presented: { clientId: string; redirectUri: string | undefined; verifier: string | undefined },
    issued: Issued,
  ): Promise<Redemption> {
    const codeHash = hashSecret(code)
    const row = await this.db.selectFrom('authorization_codes').selectAll().where('code_hash', '=', codeHash).executeTakeFirst()
    if (!row) return { ok: false, reason: 'unknown' }
    const spent = await this.db
      .updateTable('authorization_codes')
      .set({
        used_at: iso(this.clock.now()),
        family_id: issued.familyId,
        access_jti: issued.accessJti,
        access_expires_at: issued.accessExpiresAt,
      })
      .where('code_hash', '=', codeHash)
      .where('used_at', 'is', null)
      .executeTakeFirst()
    if (Number(spent.numUpdatedRows) !== 1) {
      const first = await this.db
        .selectFrom('authorization_codes')
        .select(['family_id', 'access_jti', 'access_expires_at'])
        .where('code_hash', '=', codeHash)
        .executeTakeFirstOrThrow()
      return {
        ok: false,
        reason: 'reused',
        userId: row.user_id,
        clientId: row.client_id,
        issued: {
          familyId: first.family_id ?? undefined,
          accessJti: first.access_jti ?? undefined,
          accessExpiresAt: first.access_expires_at ?? undefined,
        },
      }
    }
    if (row.expires_at <= iso(this.clock.now())) return { ok: false, reason: 'expired' }
    // RFC 6749 §4.1.3: same client, same redirect_uri; RFC 7636 §4.6: the verifier hashes to the challenge.
    if (row.client_id !== presented.clientId || row.redirect_uri !== presented.redirectUri) return { ok: false, reason: 'mismatch' }
    if (!presented.verifier || !VERIFIER.test(presented.verifier) || s256(presented.verifier) !== row.code_challenge)
      return { ok: false, reason: 'mismatch' }
    return { ok: true, code: row }
  }
}
