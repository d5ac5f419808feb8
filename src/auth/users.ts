import { randomBytes } from 'node:crypto'
import type { Clock } from '../clock.js'
import { iso } from '../clock.js'
import { hashSecret } from '../hashing.js'
import { newId } from '../ids.js'
import type { Database, Db } from '../store/schema.js'
import type { PasswordHasher } from './passwords.js'
import type { Role } from './roles.js'

export type User = {
  id: string
  email: string
  name: string
  role: Role
  pharmacy_id: string | null
  fleet_id: string | null
  driver_id: string | null
  disabled: boolean
  created_at: string
}

export type NewUser = {
  email: string
  name: string
  role: Role
  pharmacy_id?: string | null | undefined
  fleet_id?: string | null | undefined
  driver_id?: string | null | undefined
  password?: string | undefined
}

/** What authentication needs to know about a user behind a token, looked up at most every few seconds. */
export type UserStanding = { active: boolean; driverId: string | null }

/** A password-setup link works once, for 72 hours. */
const SETUP_TTL_MS = 72 * 3_600_000
// How long a user's standing (disabled, driver) is remembered by authentication. Disabling on
// this instance forgets it at once; another instance sharing PostgreSQL notices within this long.
const STANDING_TTL_MS = 5_000

/** Staff and drivers who sign in. Users are disabled, never deleted: custody events name them. */
export class UserDirectory {
  private readonly standing = new Map<string, { value: UserStanding; until: number }>()

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
    private readonly passwords: PasswordHasher,
  ) {}

  /** Creates the user; with no password, also a single-use setup token (shown once, stored hashed). */
  async create(input: NewUser): Promise<{ user: User; setupToken: string | null }> {
    const now = iso(this.clock.now())
    const row: Database['users'] = {
      id: newId('us'),
      email: input.email.toLowerCase(),
      name: input.name,
      role: input.role,
      pharmacy_id: input.pharmacy_id ?? null,
      fleet_id: input.fleet_id ?? null,
      driver_id: input.driver_id ?? null,
      password_hash: input.password ? await this.passwords.hash(input.password) : null,
      disabled: 0,
      created_at: now,
      updated_at: now,
    }
    await this.db.insertInto('users').values(row).execute()
    const setupToken = input.password ? null : await this.newSetupToken(row.id)
    return { user: toUser(row), setupToken }
  }

  async newSetupToken(userId: string): Promise<string> {
    const token = randomBytes(32).toString('base64url')
    await this.db
      .insertInto('user_setup_tokens')
      .values({ token_hash: hashSecret(token), user_id: userId, expires_at: iso(this.clock.now() + SETUP_TTL_MS), used_at: null })
      .execute()
    return token
  }

  async find(id: string): Promise<User | undefined> {
    const row = await this.db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst()
    return row && toUser(row)
  }

  async emailTaken(email: string): Promise<boolean> {
    return !!(await this.db.selectFrom('users').select('id').where('email', '=', email.toLowerCase()).executeTakeFirst())
  }

  async update(
    id: string,
    patch: { name?: string | undefined; role?: Role | undefined; driver_id?: string | null | undefined; disabled?: boolean | undefined },
  ): Promise<User | undefined> {
    const set: Partial<Database['users']> = { updated_at: iso(this.clock.now()) }
    if (patch.name !== undefined) set.name = patch.name
    if (patch.role !== undefined) set.role = patch.role
    if (patch.driver_id !== undefined) set.driver_id = patch.driver_id
    if (patch.disabled !== undefined) set.disabled = patch.disabled ? 1 : 0
    await this.db.updateTable('users').set(set).where('id', '=', id).execute()
    this.standing.delete(id)
    return this.find(id)
  }

  /**
   * The user whose email and password these are, or null. Always runs one scrypt derivation,
   * against a dummy hash for unknown or password-less accounts, so the time taken does not
   * say whether the account exists.
   */
  async checkPassword(email: string, password: string): Promise<User | null> {
    const row = await this.db.selectFrom('users').selectAll().where('email', '=', email.toLowerCase()).executeTakeFirst()
    const ok = await this.passwords.verify(password, row?.password_hash)
    return ok && row && !row.disabled ? toUser(row) : null
  }

  /** The user a setup token belongs to, if it is unused and unexpired. */
  async setupTokenUser(token: string): Promise<User | null> {
    const row = await this.db.selectFrom('user_setup_tokens').selectAll().where('token_hash', '=', hashSecret(token)).executeTakeFirst()
    if (!row || row.used_at || row.expires_at <= iso(this.clock.now())) return null
    const user = await this.find(row.user_id)
    return user && !user.disabled ? user : null
  }

  /** Sets the password through a setup token; the token is spent (single use) in the same step. */
  async setPasswordWithToken(token: string, password: string): Promise<User | null> {
    const user = await this.setupTokenUser(token)
    if (!user) return null
    const hash = await this.passwords.hash(password)
    const now = iso(this.clock.now())
    const spent = await this.db
      .updateTable('user_setup_tokens')
      .set({ used_at: now })
      .where('token_hash', '=', hashSecret(token))
      .where('used_at', 'is', null)
      .executeTakeFirst()
    if (Number(spent.numUpdatedRows) !== 1) return null // a concurrent request used it first
    await this.db.updateTable('users').set({ password_hash: hash, updated_at: now }).where('id', '=', user.id).execute()
    return user
  }

  /** Whether the user behind a token may still act; a cheap cached read for every request. */
  async standingOf(id: string): Promise<UserStanding> {
    const now = this.clock.now()
    const cached = this.standing.get(id)
    if (cached && cached.until > now) return cached.value
    const row = await this.db.selectFrom('users').select(['disabled', 'driver_id']).where('id', '=', id).executeTakeFirst()
    const value = { active: !!row && !row.disabled, driverId: row?.driver_id ?? null }
    if (this.standing.size > 10_000) this.standing.clear()
    this.standing.set(id, { value, until: now + STANDING_TTL_MS })
    return value
  }
}

export function toUser(row: Database['users']): User {
  return {
    id: row.id,
    email: row.email,
    name: row.name,
    role: row.role as Role,
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    driver_id: row.driver_id,
    disabled: !!row.disabled,
    created_at: row.created_at,
  }
}
