import { sql } from 'kysely'
import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { computedEtaMs, decideEta, distanceM, etaInForce, ROUTER_ETA_HOLD_MS, type EtaState, type Position } from '../domain/eta.js'
import { AppError, notFound } from '../errors.js'
import type { NewEvent } from '../events/outbox.js'
import { fromJson, type Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { visibleDelivery } from './delivery-visibility.js'

/** A driver is "on" a delivery from its dispatch until it ends or fails: positions are kept for these. */
const IN_PROGRESS = ['DISPATCHED', 'PICKED_UP'] as const
/** The ETA to the patient follows positions once the goods are with the driver. */
const HEADING_TO_PATIENT = 'PICKED_UP'
/** Positions a page of `GET /v1/deliveries/{id}/locations` holds at most. */
export const MAX_POSITIONS_PER_PAGE = 1_000

export type Recorded = { accepted: number; delivery_ids: string[] }
export type StoredPosition = Position & { driver_id: string }

type OnDelivery = {
  id: string
  rx_id: string
  pharmacy_id: string
  fleet_id: string | null
  status: string
  eta: string
  live_eta: string | null
  delivery_address: string | null
  average_speed_kmh: number
}

/**
 * Drivers' positions and the live ETA they drive (docs/fleet.md, Live location and ETA):
 * positions are stored per delivery in progress, and each batch recomputes the ETA of the
 * driver's deliveries heading to their patient, sending `delivery.eta-changed` and
 * `delivery.arriving` through the outbox in the same transaction.
 */
export class DriverPositionService {
  /** One batch of a driver at a time in this process: its ETA state is read and written in order. */
  private readonly lanes = new Map<string, Promise<unknown>>()

  constructor(private readonly deps: ServiceDeps) {}

  /**
   * `POST /v1/drivers/{id}/locations`: the driver themself (a driver user), their fleet, or an
   * unrestricted client. Anyone else, another fleet's driver included, gets 404.
   */
  async post(principal: Principal, driverId: string, positions: Position[]): Promise<Recorded> {
    const driver = await this.deps.db.selectFrom('drivers').select(['id', 'fleet_id']).where('id', '=', driverId).executeTakeFirst()
    const mayPost =
      driver !== undefined &&
      !principal.pharmacyId &&
      (!principal.fleetId || principal.fleetId === driver.fleet_id) &&
      (!principal.driverId || principal.driverId === driver.id)
    if (!mayPost) throw notFound('driver')
    return this.record(driver.id, driver.fleet_id, positions)
  }

  /**
   * Positions of an authenticated driver (REST or MQTT), already validated. Refused with
   * `not_on_delivery` when the driver has no delivery in progress of its own fleet.
   */
  async record(driverId: string, fleetId: string, positions: Position[]): Promise<Recorded> {
    const previous = this.lanes.get(driverId) ?? Promise.resolve()
    const run = previous.then(
      () => this.recordNow(driverId, fleetId, positions),
      () => this.recordNow(driverId, fleetId, positions),
    )
    this.lanes.set(driverId, run)
    try {
      return await run
    } finally {
      if (this.lanes.get(driverId) === run) this.lanes.delete(driverId)
    }
  }

  /** The fleet of a driver, for a connection authenticated as that driver (null: no such driver). */
  async fleetOf(driverId: string): Promise<string | null> {
    const row = await this.deps.db.selectFrom('drivers').select('fleet_id').where('id', '=', driverId).executeTakeFirst()
    return row?.fleet_id ?? null
  }

  private async recordNow(driverId: string, fleetId: string, positions: Position[]): Promise<Recorded> {
    const { db, clock, outbox } = this.deps
    const deliveries = await deliveriesOf(db, driverId, fleetId)
    if (deliveries.length === 0)
      throw new AppError('not_on_delivery', `Driver ${driverId} has no delivery in progress: positions are kept only for one.`)
    const now = clock.now()
    const newest = positions.reduce((a, b) => (Date.parse(b.at) > Date.parse(a.at) ? b : a))
    const messages = await db.transaction().execute(async (trx) => {
      const events: NewEvent[] = []
      for (const delivery of deliveries) {
        await trx
          .insertInto('driver_positions')
          .values(
            positions.map((p) => ({
              delivery_id: delivery.id,
              driver_id: driverId,
              ...p,
              at: iso(Date.parse(p.at)),
              recorded_at: iso(now),
            })),
          )
          .onConflict((oc) => oc.columns(['delivery_id', 'at']).doNothing())
          .execute()
        if (delivery.status === HEADING_TO_PATIENT) events.push(...(await this.follow(trx, delivery, newest, now)))
      }
      return events.length ? (await outbox.append(trx, events)).messages : 0
    })
    outbox.committed(messages)
    return { accepted: positions.length, delivery_ids: deliveries.map((d) => d.id) }
  }

  /** The ETA of one delivery after its driver's newest position: what changes, and the events to send. */
  private async follow(trx: Executor, delivery: OnDelivery, newest: Position, now: number): Promise<NewEvent[]> {
    const state = await this.etaRow(trx, delivery)
    const atMs = Date.parse(newest.at)
    if (state.position_at !== null && Date.parse(state.position_at) >= atMs) return [] // an older position than the one followed
    const address = coordinatesOf(delivery.delivery_address)
    const distance = address ? distanceM(newest, address) : null
    const computed = distance === null ? null : computedEtaMs(atMs, distance, delivery.average_speed_kmh, now)
    await trx
      .updateTable('delivery_etas')
      .set({ position_at: iso(atMs), distance_m: distance })
      .where('delivery_id', '=', delivery.id)
      .execute()
    return this.settle(trx, delivery, state, etaInForce(routerOf(state), computed, now), distance, now)
  }

  /**
   * Records an ETA decision: the delivery's live ETA follows it, and `delivery.eta-changed` /
   * `delivery.arriving` go out when `decideEta` says so.
   */
  private async settle(
    trx: Executor,
    delivery: OnDelivery,
    row: EtaRow,
    etaMs: number | null,
    distance: number | null,
    now: number,
  ): Promise<NewEvent[]> {
    if (etaMs === null) return []
    const state: EtaState = {
      announcedMs: Date.parse(row.announced_eta),
      announcedAtMs: row.announced_at === null ? null : Date.parse(row.announced_at),
      arriving: row.arriving_at !== null,
    }
    const decision = decideEta(state, etaMs, distance, now)
    const eta = iso(etaMs)
    if (eta !== delivery.live_eta) await trx.updateTable('deliveries').set({ live_eta: eta }).where('id', '=', delivery.id).execute()
    if (decision.changed || decision.arriving) {
      await trx
        .updateTable('delivery_etas')
        .set({
          announced_eta: iso(decision.next.announcedMs),
          announced_at: decision.next.announcedAtMs === null ? null : iso(decision.next.announcedAtMs),
          ...(decision.arriving ? { arriving_at: iso(now) } : {}),
        })
        .where('delivery_id', '=', delivery.id)
        .execute()
    }
    const source = routerOf(row) !== null && now < Date.parse(row.router_until!) ? 'router' : 'computed'
    const envelope = { pharmacy_id: delivery.pharmacy_id, fleet_id: delivery.fleet_id, delivery_id: delivery.id, rx_id: delivery.rx_id }
    const distance_m = distance === null ? null : Math.round(distance)
    const events: NewEvent[] = []
    if (decision.changed)
      events.push({ type: 'delivery.eta-changed', ...envelope, data: { eta, previous_eta: row.announced_eta, source, distance_m } })
    if (decision.arriving) events.push({ type: 'delivery.arriving', ...envelope, data: { eta, distance_m: distance_m ?? 0 } })
    return events
  }

  /** The delivery's ETA row, made on first use with the promised ETA as the one announced; locked for this transaction on PostgreSQL. */
  private async etaRow(trx: Executor, delivery: OnDelivery): Promise<EtaRow> {
    await trx
      .insertInto('delivery_etas')
      .values({ delivery_id: delivery.id, announced_eta: delivery.eta })
      .onConflict((oc) => oc.column('delivery_id').doNothing())
      .execute()
    let query = trx.selectFrom('delivery_etas').selectAll().where('delivery_id', '=', delivery.id)
    if (this.deps.dialect === 'postgres') query = query.forUpdate()
    return query.executeTakeFirstOrThrow()
  }

  /**
   * `PUT /v1/deliveries/{id}/eta`: the fleet's own router says when the goods arrive. It wins
   * over the computed ETA for ROUTER_ETA_HOLD_MS. The delivery's fleet (a driver user: its own
   * delivery) or an unrestricted client; a pharmacy reads ETAs, it does not set them.
   */
  async setRouterEta(principal: Principal, deliveryId: string, etaText: string): Promise<{ eta: string; source: 'router'; until: string }> {
    const { db, clock, outbox } = this.deps
    const row = await deliveryRow(db).where('deliveries.id', '=', deliveryId).executeTakeFirst()
    const delivery = visibleDelivery(principal, row)
    if (principal.pharmacyId)
      throw new AppError('insufficient_scope', "Only the delivery's fleet (its router or driver) or an unrestricted client posts an ETA.")
    if (delivery.status !== HEADING_TO_PATIENT)
      throw new AppError(
        'not_on_delivery',
        `An ETA is posted for a delivery on its way to the patient (PICKED_UP); this one is ${delivery.status}.`,
      )
    const now = clock.now()
    const etaMs = Date.parse(etaText)
    const until = iso(now + ROUTER_ETA_HOLD_MS)
    const messages = await db.transaction().execute(async (trx) => {
      const state = await this.etaRow(trx, delivery)
      await trx
        .updateTable('delivery_etas')
        .set({ router_eta: iso(etaMs), router_until: until })
        .where('delivery_id', '=', delivery.id)
        .execute()
      const events = await this.settle(trx, delivery, { ...state, router_eta: iso(etaMs), router_until: until }, etaMs, null, now)
      return events.length ? (await outbox.append(trx, events)).messages : 0
    })
    outbox.committed(messages)
    return { eta: iso(etaMs), source: 'router', until }
  }

  /** `GET /v1/deliveries/{id}/locations`: the delivery's pharmacy, fleet and driver, oldest first (or newest first). */
  async list(
    principal: Principal,
    deliveryId: string,
    q: { after?: string | undefined; before?: string | undefined; order?: 'asc' | 'desc'; limit: number },
  ) {
    const row = await this.deps.db
      .selectFrom('deliveries')
      .select(['pharmacy_id', 'fleet_id', 'driver_id'])
      .where('id', '=', deliveryId)
      .executeTakeFirst()
    visibleDelivery(principal, row)
    let query = this.deps.db
      .selectFrom('driver_positions')
      .select(['driver_id', 'lat', 'lng', 'accuracy_m', 'at'])
      .where('delivery_id', '=', deliveryId)
      .orderBy('at', q.order ?? 'asc')
      .limit(q.limit + 1)
    if (q.after) query = query.where('at', '>', q.after)
    if (q.before) query = query.where('at', '<', q.before)
    const rows = await query.execute()
    const data = rows.slice(0, q.limit).map(toPosition)
    return { data, next_cursor: rows.length > q.limit ? data.at(-1)!.at : null }
  }

  /**
   * Retention (docs/fleet.md): positions and ETA state of deliveries over (DELIVERED, RETURNED,
   * CANCELLED) for longer than `retentionMs` are deleted, at most `batch` positions per call, so
   * one call holds the store briefly. Returns how many positions went.
   */
  async purgeEnded(retentionMs: number, batch: number): Promise<number> {
    const { db, clock } = this.deps
    const cutoff = iso(clock.now() - retentionMs)
    const over = db
      .selectFrom('deliveries')
      .select('id')
      .where('status', 'in', ['DELIVERED', 'RETURNED', 'CANCELLED'])
      .where('updated_at', '<', cutoff)
    const ids = await db.selectFrom('driver_positions').select('id').where('delivery_id', 'in', over).limit(batch).execute()
    if (ids.length > 0)
      await db
        .deleteFrom('driver_positions')
        .where(
          'id',
          'in',
          ids.map((r) => r.id),
        )
        .execute()
    if (ids.length < batch) await db.deleteFrom('delivery_etas').where('delivery_id', 'in', over).execute()
    return ids.length
  }
}

type EtaRow = {
  position_at: string | null
  router_eta: string | null
  router_until: string | null
  announced_eta: string
  announced_at: string | null
  arriving_at: string | null
}

const routerOf = (row: Pick<EtaRow, 'router_eta' | 'router_until'>) =>
  row.router_eta && row.router_until ? { etaMs: Date.parse(row.router_eta), untilMs: Date.parse(row.router_until) } : null

const deliveryRow = (db: Executor) =>
  db
    .selectFrom('deliveries')
    .innerJoin('prescriptions', 'prescriptions.id', 'deliveries.rx_id')
    .leftJoin('fleets', 'fleets.id', 'deliveries.fleet_id')
    .select([
      'deliveries.id',
      'deliveries.rx_id',
      'deliveries.pharmacy_id',
      'deliveries.fleet_id',
      'deliveries.driver_id',
      'deliveries.status',
      'deliveries.eta',
      'deliveries.live_eta',
      'prescriptions.delivery_address',
      sql<number>`coalesce(fleets.average_speed_kmh, 25)`.as('average_speed_kmh'),
    ])

/** The driver's deliveries in progress, of its own fleet only (a driver never moves another fleet's delivery). */
async function deliveriesOf(db: Executor, driverId: string, fleetId: string): Promise<OnDelivery[]> {
  return deliveryRow(db)
    .where('deliveries.driver_id', '=', driverId)
    .where('deliveries.fleet_id', '=', fleetId)
    .where('deliveries.status', 'in', IN_PROGRESS)
    .orderBy('deliveries.id')
    .execute()
}

function coordinatesOf(address: string | null): { lat: number; lng: number } | null {
  const value = fromJson<Record<string, unknown> | null>(address)
  if (!value || typeof value.lat !== 'number' || typeof value.lng !== 'number') return null
  return { lat: value.lat, lng: value.lng }
}

const toPosition = (r: { driver_id: string; lat: number; lng: number; accuracy_m: number; at: string }): StoredPosition => ({
  lat: Number(r.lat),
  lng: Number(r.lng),
  accuracy_m: Number(r.accuracy_m),
  at: r.at,
  driver_id: r.driver_id,
})

/**
 * The newest position of a delivery, for the views that show where the goods are (the patient's
 * tracking page, the fleet embed, the console); null before any. The caller has already decided
 * that its reader may see the delivery.
 */
/**
 * A reattempt's new trip: the last attempt's ETA state (its newest position, router ETA,
 * announcements, arriving) is dropped in the reattempt's transaction, so the next position starts
 * from the promise again. The delivery's `live_eta` is cleared with the reattempt's own changes.
 */
export async function forgetEtaState(trx: Executor, deliveryId: string): Promise<void> {
  await trx.deleteFrom('delivery_etas').where('delivery_id', '=', deliveryId).execute()
}

export async function lastPosition(
  db: Executor,
  deliveryId: string,
): Promise<{ lat: number; lng: number; accuracy_m: number; at: string } | null> {
  const row = await db
    .selectFrom('driver_positions')
    .select(['lat', 'lng', 'accuracy_m', 'at'])
    .where('delivery_id', '=', deliveryId)
    .orderBy('at', 'desc')
    .limit(1)
    .executeTakeFirst()
  return row ? { lat: Number(row.lat), lng: Number(row.lng), accuracy_m: Number(row.accuracy_m), at: row.at } : null
}
