import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { AppError, validationFailed } from '../errors.js'
import { hashSecret, newSecret, secretMatches } from '../hashing.js'
import { newId } from '../ids.js'
import type { RecordAnswer } from '../store/record-answer.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import type { SensorRecord } from '../domain/sensor-calibration.js'
import { isUniqueViolation } from '../store/errors.js'
import type { ServiceDeps } from './context.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { canSee, visibleOr404 } from '../auth/tenancy.js'
import { countOwned, createWithinLimit } from './tenant-limits.js'

export type Tote = {
  id: string
  serial: string
  pharmacy_id: string | null
  fleet_id: string | null
  created_at: string
  sensor: SensorRecord | null
}
const toteColumns = ['id', 'serial', 'pharmacy_id', 'fleet_id', 'created_at', 'sensor'] as const
const toTote = (row: Pick<Database['totes'], (typeof toteColumns)[number]>): Tote => ({ ...row, sensor: fromJson(row.sensor) })
export type ToteWithCredentials = Tote & {
  mqtt: { username: string; password: string; client_id: string; readings_topic: string; errors_topic: string }
}

/**
 * Where a tote's MQTT account goes when an external broker authenticates totes
 * (src/mqtt/broker-accounts.ts): enqueued in the registering transaction, then handed to the broker.
 */
export type ToteAccounts = {
  enqueue(trx: Executor, toteId: string, password: string): Promise<void>
  /** Resolves once a pass over due accounts is over (the broker has this tote's, if it is up). */
  provisionDue(): Promise<void>
}

// POST /v1/totes waits this long for the broker to have the account, so that a tote can connect
// with the answer at once; past it, or with the broker down, the account follows in the background.
const PROVISION_WAIT_MS = 3_000

const readingsTopic = (toteId: string) => `rxtrace/v1/totes/${toteId}/readings`
const errorsTopic = (toteId: string) => `rxtrace/v1/totes/${toteId}/errors`

/** Temperature-sensing totes and their MQTT credentials (broker/README.md, Authentication); the password is shown once. */
export class ToteService {
  constructor(
    private readonly deps: ServiceDeps,
    /** Totes one pharmacy or fleet may register (docs/api.md, Per-tenant limits): each may hold MQTT sessions. */
    private readonly maxPerTenant = 10_000,
    /** Set with an external broker (`MQTT_URL`); the embedded broker reads the totes table itself. */
    private readonly accounts?: ToteAccounts,
  ) {}

  /** The MQTT password is shown once: `record` keeps the answer without it. */
  async register(
    principal: Principal,
    input: { serial: string; pharmacy_id?: string | undefined; fleet_id?: string | undefined },
    record?: RecordAnswer<ToteWithCredentials>,
  ): Promise<ToteWithCredentials> {
    const pharmacyId = input.pharmacy_id ?? (input.fleet_id ? undefined : (principal.pharmacyId ?? undefined))
    const fleetId = input.fleet_id ?? (input.pharmacy_id ? undefined : (principal.fleetId ?? undefined))
    if (!pharmacyId === !fleetId)
      throw validationFailed([{ pointer: '/pharmacy_id', message: 'name exactly one owner: pharmacy_id or fleet_id' }])
    if (!canSee(principal, { pharmacy_id: pharmacyId ?? null, fleet_id: fleetId ?? null }))
      throw validationFailed([{ pointer: pharmacyId ? '/pharmacy_id' : '/fleet_id', message: 'no such owner' }])
    const owner = pharmacyId
      ? await this.deps.db.selectFrom('pharmacies').select('id').where('id', '=', pharmacyId).executeTakeFirst()
      : await this.deps.db.selectFrom('fleets').select('id').where('id', '=', fleetId!).executeTakeFirst()
    if (!owner) throw validationFailed([{ pointer: pharmacyId ? '/pharmacy_id' : '/fleet_id', message: 'no such owner' }])
    // Serials are unique per owner: another tenant's tote with the same serial is none of this one's business.
    const duplicate = await this.deps.db
      .selectFrom('totes')
      .select('id')
      .where('serial', '=', input.serial)
      .where(pharmacyId ? 'pharmacy_id' : 'fleet_id', '=', (pharmacyId ?? fleetId)!)
      .executeTakeFirst()
    if (duplicate) throw duplicateSerial(input.serial)
    const password = newSecret('tp_')
    const tote: Tote = {
      id: newId('tt'),
      serial: input.serial,
      pharmacy_id: pharmacyId ?? null,
      fleet_id: fleetId ?? null,
      created_at: iso(this.deps.clock.now()),
      sensor: null,
    }
    const registered = {
      ...tote,
      mqtt: { username: tote.id, password, client_id: tote.id, readings_topic: readingsTopic(tote.id), errors_topic: errorsTopic(tote.id) },
    }
    const tenant = { pharmacy_id: tote.pharmacy_id, fleet_id: tote.fleet_id }
    try {
      await createWithinLimit(
        this.deps,
        { what: 'totes', max: this.maxPerTenant, owner: tenant },
        (trx) => countOwned(trx, 'totes', tenant),
        async (trx) => {
          await trx
            .insertInto('totes')
            .values({ ...tote, sensor: null, mqtt_password_hash: hashSecret(password) })
            .execute()
          await this.accounts?.enqueue(trx, tote.id, password)
          await record?.(trx, registered)
        },
      )
    } catch (error) {
      if (isUniqueViolation(error)) throw duplicateSerial(input.serial) // registered concurrently
      throw error
    }
    if (this.accounts) await provisioned(this.accounts, this.deps)
    return registered
  }

  async get(principal: Principal, id: string): Promise<Tote> {
    const row = await this.deps.db.selectFrom('totes').select(toteColumns).where('id', '=', id).executeTakeFirst()
    return toTote(visibleOr404(principal, row, 'tote'))
  }

  /**
   * Records the tote's sensor and its calibration (docs/api.md, Totes: sensor and calibration),
   * replacing the previous record; the audit log keeps who changed it and when.
   */
  async updateSensor(principal: Principal, id: string, sensor: SensorRecord): Promise<Tote> {
    await this.get(principal, id)
    if (Date.parse(sensor.calibration_due) <= Date.parse(sensor.calibrated_at))
      throw validationFailed([{ pointer: '/sensor/calibration_due', message: 'must be after calibrated_at' }])
    await this.deps.db
      .updateTable('totes')
      .set({ sensor: toJson(sensor) })
      .where('id', '=', id)
      .execute()
    return this.get(principal, id)
  }

  async list(principal: Principal, page: PageRequest): Promise<Page<Tote>> {
    let query = this.deps.db.selectFrom('totes').select(toteColumns)
    if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
    const found = await paginate(query, 'id', page)
    return { data: found.data.map(toTote), next_cursor: found.next_cursor }
  }

  /** MQTT CONNECT: the username is the tote id, the password the one shown at registration. */
  async authenticate(username: string, password: string): Promise<string | null> {
    const row = await this.deps.db.selectFrom('totes').select(['id', 'mqtt_password_hash']).where('id', '=', username).executeTakeFirst()
    return row && secretMatches(password, row.mqtt_password_hash) ? row.id : null
  }
}

/** Waits (a bounded time) for the pass that gives the broker this account; a failure is the outbox's to retry. */
async function provisioned(accounts: ToteAccounts, deps: ServiceDeps): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, PROVISION_WAIT_MS)))
  await Promise.race([accounts.provisionDue().catch((err) => deps.logger.warn({ err }, 'tote account pass failed; it is retried')), late])
  clearTimeout(timer)
}

const duplicateSerial = (serial: string) => new AppError('conflict', `This owner already has a tote with serial "${serial}".`)
