import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { DEFAULT_AVERAGE_SPEED_KMH } from '../domain/eta.js'
import { AppError, notFound } from '../errors.js'
import { newId } from '../ids.js'
import { fromJson, toJson } from '../store/schema.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'

export type Branding = { display_name?: string | undefined; logo_url?: string | undefined; primary_color?: string | undefined }
export type Fleet = {
  id: string
  name: string
  branding: Branding
  embed_origins: string[]
  timezone: string
  /** km/h for ETAs from drivers' positions (docs/fleet.md, Live location and ETA). */
  average_speed_kmh: number
  created_at: string
}
export type FleetChanges = {
  name?: string | undefined
  branding?: Branding | undefined
  embed_origins?: string[] | undefined
  timezone?: string | undefined
  average_speed_kmh?: number | undefined
}
export type Driver = { id: string; fleet_id: string; name: string; phone?: string | null; created_at: string }

/** Fleets and their drivers: who a delivery can be dispatched to. */
export class FleetService {
  constructor(private readonly deps: ServiceDeps) {}

  async create(
    principal: Principal,
    input: {
      name: string
      branding?: Branding | undefined
      embed_origins?: string[] | undefined
      timezone?: string | undefined
      average_speed_kmh?: number | undefined
    },
    record?: RecordAnswer<Fleet>,
  ): Promise<Fleet> {
    if (principal.pharmacyId || principal.fleetId) throw new AppError('insufficient_scope', 'Only an unrestricted client registers fleets.')
    const origins = input.embed_origins ?? []
    const row = {
      id: newId('fl'),
      name: input.name,
      branding: toJson(input.branding ?? {}),
      embed_origins: toJson(origins),
      timezone: input.timezone ?? 'UTC',
      average_speed_kmh: input.average_speed_kmh ?? DEFAULT_AVERAGE_SPEED_KMH,
      created_at: iso(this.deps.clock.now()),
    }
    const fleet: Fleet = {
      id: row.id,
      name: row.name,
      branding: input.branding ?? {},
      embed_origins: origins,
      timezone: row.timezone,
      average_speed_kmh: row.average_speed_kmh,
      created_at: row.created_at,
    }
    await this.deps.db.transaction().execute(async (trx) => {
      await trx.insertInto('fleets').values(row).execute()
      await record?.(trx, fleet)
    })
    return fleet
  }

  async get(principal: Principal, id: string): Promise<Fleet> {
    const row = await this.deps.db.selectFrom('fleets').selectAll().where('id', '=', id).executeTakeFirst()
    if (!row || !this.visible(principal, row.id)) throw notFound('fleet')
    return toFleet(row)
  }

  /** Changes the name, branding (replaced as a whole), embed origins or time zone: the fleet itself or an unrestricted client. */
  async update(principal: Principal, id: string, changes: FleetChanges): Promise<Fleet> {
    const fleet = await this.changeable(principal, id)
    const next: Fleet = {
      ...fleet,
      ...(changes.name === undefined ? {} : { name: changes.name }),
      ...(changes.branding === undefined ? {} : { branding: changes.branding }),
      ...(changes.embed_origins === undefined ? {} : { embed_origins: changes.embed_origins }),
      ...(changes.timezone === undefined ? {} : { timezone: changes.timezone }),
      ...(changes.average_speed_kmh === undefined ? {} : { average_speed_kmh: changes.average_speed_kmh }),
    }
    await this.deps.db
      .updateTable('fleets')
      .set({
        name: next.name,
        branding: toJson(next.branding),
        embed_origins: toJson(next.embed_origins),
        timezone: next.timezone,
        average_speed_kmh: next.average_speed_kmh,
      })
      .where('id', '=', id)
      .execute()
    return next
  }

  async list(principal: Principal, page: PageRequest): Promise<Page<Fleet>> {
    let query = this.deps.db.selectFrom('fleets').selectAll()
    if (principal.fleetId) query = query.where('id', '=', principal.fleetId)
    const result = await paginate(query, 'id', page)
    return { data: result.data.map(toFleet), next_cursor: result.next_cursor }
  }

  async addDriver(
    principal: Principal,
    fleetId: string,
    input: { name: string; phone?: string | undefined },
    record?: RecordAnswer<Driver>,
  ): Promise<Driver> {
    await this.changeable(principal, fleetId)
    const row = { id: newId('dr'), fleet_id: fleetId, name: input.name, phone: input.phone ?? null, created_at: iso(this.deps.clock.now()) }
    await this.deps.db.transaction().execute(async (trx) => {
      await trx.insertInto('drivers').values(row).execute()
      await record?.(trx, asSeenBy(principal, row))
    })
    return asSeenBy(principal, row)
  }

  async listDrivers(principal: Principal, fleetId: string, page: PageRequest): Promise<Page<Driver>> {
    await this.get(principal, fleetId)
    const result = await paginate(this.deps.db.selectFrom('drivers').selectAll().where('fleet_id', '=', fleetId), 'id', page)
    return { data: result.data.map((row) => asSeenBy(principal, row)), next_cursor: result.next_cursor }
  }

  /**
   * The fleet `fleetId` names, if this token may change it or its drivers: only the fleet itself
   * or an unrestricted client. A pharmacy reads fleets and dispatches to them, never changes them.
   * Every route that changes a fleet or its drivers goes through here.
   */
  private async changeable(principal: Principal, fleetId: string): Promise<Fleet> {
    const fleet = await this.get(principal, fleetId)
    if (principal.pharmacyId)
      throw new AppError('insufficient_scope', 'Only the fleet itself or an unrestricted client changes a fleet or its drivers.')
    return fleet
  }

  // Pharmacy-restricted tokens dispatch to fleets, so they may read them; fleet tokens only their own.
  private visible(principal: Principal, fleetId: string): boolean {
    return principal.fleetId ? principal.fleetId === fleetId : true
  }
}

const toFleet = (row: {
  id: string
  name: string
  branding: string
  embed_origins: string
  timezone: string
  average_speed_kmh: number
  created_at: string
}): Fleet => ({
  id: row.id,
  name: row.name,
  branding: fromJson(row.branding),
  embed_origins: fromJson(row.embed_origins),
  timezone: row.timezone,
  average_speed_kmh: Number(row.average_speed_kmh),
  created_at: row.created_at,
})

/**
 * A driver's phone number is personal data: shown to tokens of the driver's own fleet, and to
 * unrestricted clients (the deployment's operators, who could mint a fleet token anyway); left
 * out for everyone else, pharmacies included.
 */
function asSeenBy(principal: Principal, driver: Driver): Driver {
  if (principal.fleetId === driver.fleet_id || (!principal.fleetId && !principal.pharmacyId)) return driver
  const { phone: _personal, ...rest } = driver
  return rest
}
