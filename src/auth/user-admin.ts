import { AppError, notFound, validationFailed } from '../errors.js'
import type { Page, PageRequest } from '../store/pagination.js'
import { paginate } from '../store/pagination.js'
import { canSee } from './tenancy.js'
import type { Db } from '../store/schema.js'
import type { ConsentStore } from './consents.js'
import { passwordProblem } from './password-policy.js'
import type { RefreshTokens } from './refresh-tokens.js'
import { roles, type Role } from './roles.js'
import type { Principal } from './scopes.js'
import type { SessionStore } from './sessions.js'
import { toUser, type NewUser, type User, type UserDirectory } from './users.js'

/** Who manages users: a token (with its scopes and tenant), or the operator's CLI (null: unrestricted). */
export type Manager = Principal | null

/**
 * Creating, changing and disabling users, with the rule that no token hands out more than it
 * holds: the role's scopes must all be the caller's, and a tenant-restricted caller manages
 * only its own tenant's users.
 */
export class UserAdmin {
  constructor(
    private readonly db: Db,
    private readonly users: UserDirectory,
    private readonly sessions: SessionStore,
    private readonly refreshTokens: RefreshTokens,
    private readonly consents: ConsentStore,
    private readonly issuer: string,
  ) {}

  async create(manager: Manager, input: NewUser): Promise<User & { setup_url?: string }> {
    await this.checkPlacement(manager, input.role, input, '')
    const problem = input.password === undefined ? null : await passwordProblem(input.password, input)
    if (problem) throw validationFailed([{ pointer: '/password', message: problem }])
    if (await this.users.emailTaken(input.email)) {
      throw new AppError('conflict', 'A user with this email exists.', { errors: [{ pointer: '/email', message: 'is taken' }] })
    }
    const { user, setupToken } = await this.users.create(input)
    return setupToken ? { ...user, setup_url: this.setupUrl(setupToken) } : user
  }

  setupUrl(token: string): string {
    return `${this.issuer}/account/setup?token=${token}`
  }

  async get(manager: Manager, id: string): Promise<User> {
    const user = await this.users.find(id)
    if (!user || (manager && !canSee(manager, user))) throw notFound('user')
    return user
  }

  async list(manager: Manager, page: PageRequest): Promise<Page<User>> {
    let query = this.db.selectFrom('users').selectAll()
    if (manager?.pharmacyId) query = query.where('pharmacy_id', '=', manager.pharmacyId)
    if (manager?.fleetId) query = query.where('fleet_id', '=', manager.fleetId)
    const result = await paginate(query, 'id', page)
    return { data: result.data.map(toUser), next_cursor: result.next_cursor }
  }

  /**
   * Disabling, a new role (up or down) or a new driver link ends the user's sessions and revokes
   * their refresh tokens and the access tokens those issued: they were granted under the old standing.
   */
  async update(
    manager: Manager,
    id: string,
    patch: { name?: string | undefined; role?: Role | undefined; driver_id?: string | null | undefined; disabled?: boolean | undefined },
  ): Promise<User> {
    const user = await this.get(manager, id)
    this.checkPower(manager, user.role, '') // may not touch someone more powerful
    const role = patch.role ?? user.role
    // Leaving the driver role drops the driver link; naming one outside it is refused below.
    const driverId = role === 'driver' ? (patch.driver_id === undefined ? user.driver_id : patch.driver_id) : (patch.driver_id ?? null)
    if (patch.role !== undefined || patch.driver_id !== undefined) {
      await this.checkPlacement(manager, role, { pharmacy_id: user.pharmacy_id, fleet_id: user.fleet_id, driver_id: driverId }, '')
    }
    const updated = await this.users.update(id, { ...patch, driver_id: driverId })
    // What the person may do changed (or they may do nothing): what they hold was granted under the
    // old standing, so it ends, and they sign in again under the new one.
    if (patch.disabled || role !== user.role || driverId !== user.driver_id) await this.endEverythingOf(id)
    return updated!
  }

  /** Ends the user's sessions and revokes their refresh tokens, the access tokens those issued, and their consents. */
  private async endEverythingOf(id: string): Promise<void> {
    await this.sessions.endAllOf(id)
    await this.refreshTokens.revokeForUser(id)
    await this.consents.forget(id)
  }

  private checkPower(manager: Manager, role: Role, prefix: string): void {
    if (!manager) return
    const beyond = roles[role].scopes.filter((s) => !manager.scopes.has(s))
    if (beyond.length)
      throw validationFailed([{ pointer: `${prefix}/role`, message: `this role holds scopes you do not: ${beyond.join(' ')}` }])
    if (role === 'admin' && (manager.pharmacyId || manager.fleetId))
      throw validationFailed([{ pointer: `${prefix}/role`, message: 'only an unrestricted administrator manages admins' }])
  }

  /** The role's tenant is named, exists and is the caller's; a driver names a driver of that fleet. */
  private async checkPlacement(
    manager: Manager,
    role: Role,
    at: { pharmacy_id?: string | null | undefined; fleet_id?: string | null | undefined; driver_id?: string | null | undefined },
    prefix: string,
  ) {
    this.checkPower(manager, role, prefix)
    const tenant = roles[role].tenant
    const fail = (pointer: string, message: string) => validationFailed([{ pointer: `${prefix}${pointer}`, message }])
    if (tenant === 'pharmacy') {
      if (!at.pharmacy_id || at.fleet_id) throw fail('/pharmacy_id', `a ${role} belongs to one pharmacy: give pharmacy_id, not fleet_id`)
      if (!(await this.db.selectFrom('pharmacies').select('id').where('id', '=', at.pharmacy_id).executeTakeFirst()))
        throw fail('/pharmacy_id', `no pharmacy ${at.pharmacy_id}`)
    } else if (tenant === 'fleet') {
      if (!at.fleet_id || at.pharmacy_id) throw fail('/fleet_id', `a ${role} belongs to one fleet: give fleet_id, not pharmacy_id`)
      if (!(await this.db.selectFrom('fleets').select('id').where('id', '=', at.fleet_id).executeTakeFirst()))
        throw fail('/fleet_id', `no fleet ${at.fleet_id}`)
    } else if (at.pharmacy_id || at.fleet_id) {
      throw fail('/role', 'an admin belongs to no pharmacy or fleet')
    }
    if (manager?.pharmacyId && at.pharmacy_id !== manager.pharmacyId) throw fail('/pharmacy_id', `must be ${manager.pharmacyId}`)
    if (manager?.fleetId && at.fleet_id !== manager.fleetId) throw fail('/fleet_id', `must be ${manager.fleetId}`)
    if (role === 'driver') {
      if (!at.driver_id) throw fail('/driver_id', 'a driver user names the driver (dr_…) whose deliveries they see')
      const driver = await this.db.selectFrom('drivers').select('fleet_id').where('id', '=', at.driver_id).executeTakeFirst()
      if (!driver || driver.fleet_id !== at.fleet_id) throw fail('/driver_id', `${at.driver_id} is not a driver of fleet ${at.fleet_id}`)
    } else if (at.driver_id) {
      throw fail('/driver_id', 'only a driver user names a driver')
    }
  }
}
