import type { Clock } from '../clock.js'
import type { Db } from '../store/schema.js'
import type { AuditLog } from './audit-log.js'
import { AuthorizationCodes } from './codes.js'
import { ConsentStore } from './consents.js'
import { SignatureAuthority } from './e-signatures.js'
import { PasswordHasher, type ScryptParams } from './passwords.js'
import { RefreshTokens } from './refresh-tokens.js'
import { SessionStore } from './sessions.js'
import { MemorySignInThrottle } from './sign-in-throttle.js'
import { SharedSignInThrottle } from './shared-sign-in-throttle.js'
import type { Dialect } from '../store/dialect.js'
import type { TokenService } from './tokens.js'
import { UserAdmin } from './user-admin.js'
import { UserDirectory } from './users.js'

/** Everything people's sign-in needs, built once by the composition root. */
export function createPeople({
  db,
  dialect,
  clock,
  tokens,
  audit,
  scrypt,
}: {
  db: Db
  /** With PostgreSQL, failed sign-ins are counted in the store every copy shares. */
  dialect: Dialect
  clock: Clock
  tokens: TokenService
  audit: AuditLog
  scrypt?: ScryptParams
}) {
  const passwords = new PasswordHasher(scrypt)
  const users = new UserDirectory(db, clock, passwords)
  const sessions = new SessionStore(db, clock)
  const consents = new ConsentStore(db, clock)
  const refreshTokens = new RefreshTokens(db, clock, tokens, audit, consents)
  const throttle = dialect === 'postgres' ? new SharedSignInThrottle(db, clock) : new MemorySignInThrottle(clock)
  return {
    passwords,
    users,
    sessions,
    refreshTokens,
    consents,
    codes: new AuthorizationCodes(db, clock),
    throttle,
    // E-signatures count wrong passwords with sign-in's throttle: one account's guesses add up through either door.
    signatures: new SignatureAuthority(db, clock, passwords, throttle),
    admin: new UserAdmin(db, users, sessions, refreshTokens, consents, tokens.issuer),
  }
}

export type People = ReturnType<typeof createPeople>
