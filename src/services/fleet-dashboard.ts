import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { storedFigures, type ColdChainFigures, type ColdChainStatus } from '../domain/cold-chain.js'
import type { DeliveryStatus } from '../domain/delivery-machine.js'
import { distanceMetres, type LatLng } from '../domain/pricing.js'
import { fromJson, type Database, type Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { fleetMoneyVisibleTo } from './fleet-money.js'
import { PeriodReader } from './reconciliation.js'

const STATUSES: readonly DeliveryStatus[] = ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'DELIVERED', 'FAILED', 'RETURNED', 'CANCELLED']
// Lists on the dashboard are for people to look at: the newest this many, with the full count beside.
const LIST_LIMIT = 100

/** A driver's newest position on a delivery (src/services/driver-positions.ts, when positions are kept). */
export type Position = { lat: number; lng: number; accuracy_m: number | null; at: string }
export type PositionReader = (db: Executor, deliveryId: string) => Promise<Position | null>

/** Where the driver was last seen, and how far that is from the delivery address when it has coordinates. */
type LastPosition = Position & { distance_m: number | null }

type InProgress = {
  delivery_id: string
  status: DeliveryStatus
  driver_id: string | null
  driver_name: string | null
  pharmacy_name: string
  /** What is carried, as the pharmacy describes each item: how a dispatcher tells deliveries apart. */
  items: string[]
  tote_id: string | null
  eta: string
  cold_chain: { required: boolean; state: ColdChainStatus; min_c: number | null; max_c: number | null }
  updated_at: string
  last_position: LastPosition | null
}
type OpenException = {
  delivery_id: string
  kind: 'cold_chain_excursion' | 'cold_chain_break' | 'failed'
  since: string
  status: DeliveryStatus
  driver_name: string | null
  pharmacy_name: string
  items: string[]
}

/** What the embedded page shows: deliveries and exceptions, nothing of the fleet's money. */
export type LiveView = {
  fleet_id: string
  /** The fleet's IANA time zone: the embedded page shows local times in it. */
  timezone: string
  generated_at: string
  counts: Record<DeliveryStatus, number>
  open_exceptions: { count: number; items: OpenException[] }
  in_progress: { count: number; items: InProgress[] }
}

export type Dashboard = LiveView & {
  period: { from: string; to: string }
  on_time: { delivered: number; on_time: number; rate: number | null }
  payout: { currency: string | null; lines: number; gross_cents: number; payout_cents: number }
}

/**
 * The fleet's dashboard (docs/fleet.md, Dashboard). "This period" is the current calendar month
 * in UTC; "on time" is delivered to the patient at or before the delivery's `eta` (the
 * prescription's `deliver_by` when it had one).
 */
export class FleetDashboardService {
  constructor(
    private readonly deps: ServiceDeps,
    /** The driver's last position on a delivery; none until positions are kept. */
    private readonly lastPosition: PositionReader = async () => null,
  ) {}

  async dashboard(principal: Principal, fleetId: string): Promise<Dashboard> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
    const period = currentMonth(this.deps.clock.now())
    const [live, onTime, payout] = await Promise.all([this.liveView(fleetId), this.onTime(fleetId, period), this.payout(fleetId, period)])
    return { ...live, period, on_time: onTime, payout }
  }

  /** No access check: the caller proved it may see this fleet (a token, or an embed session). */
  async liveView(fleetId: string): Promise<LiveView> {
    const db = this.deps.db
    const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<DeliveryStatus, number>
    const grouped = await db
      .selectFrom('deliveries')
      .select(['status', (eb) => eb.fn.countAll().as('n')])
      .where('fleet_id', '=', fleetId)
      .groupBy('status')
      .execute()
    for (const row of grouped) counts[row.status as DeliveryStatus] = Number(row.n)

    // Who and for whom, by name: what a dispatcher knows a delivery by (one join, no request per row).
    const withNames = () =>
      db
        .selectFrom('deliveries')
        .leftJoin('drivers', 'drivers.id', 'deliveries.driver_id')
        .innerJoin('pharmacies', 'pharmacies.id', 'deliveries.pharmacy_id')
        .where('deliveries.fleet_id', '=', fleetId)
    const open = await withNames()
      .innerJoin('prescriptions', 'prescriptions.id', 'deliveries.rx_id')
      .selectAll('deliveries')
      .select(['drivers.name as driver_name', 'pharmacies.name as pharmacy_name', 'prescriptions.delivery_address', 'prescriptions.items'])
      .where('deliveries.status', 'in', ['DISPATCHED', 'PICKED_UP'])
      .orderBy('deliveries.updated_at', 'desc')
      .limit(LIST_LIMIT)
      .execute()
    // The address's coordinates only become a distance: the fleet's view never carries the address.
    const positions = await Promise.all(open.map((row) => this.positionOf(row.id, row.delivery_address)))
    const inProgress = open.map((row, i) => inProgressOf(row, positions[i]!))
    // An exception is open while the delivery is: a cold chain in excursion or broken, or a failure not yet returned.
    const failed = await withNames()
      .innerJoin('prescriptions', 'prescriptions.id', 'deliveries.rx_id')
      .select([
        'prescriptions.items',
        'deliveries.id',
        'deliveries.status',
        'deliveries.updated_at',
        'drivers.name as driver_name',
        'pharmacies.name as pharmacy_name',
      ])
      .where('deliveries.status', '=', 'FAILED')
      .orderBy('deliveries.updated_at', 'desc')
      .limit(LIST_LIMIT)
      .execute()
    const fleet = await db.selectFrom('fleets').select('timezone').where('id', '=', fleetId).executeTakeFirst()
    const failedAt = await this.failedAt(failed.map((f) => f.id))
    // `since` is when the exception began (the break, the excursion's start, the failed attempt),
    // not when the delivery last changed: a handoff or a decision later must not make it look newer.
    const coldChain = open.flatMap((row): OpenException[] => {
      const figures = figuresOf(row)
      if (figures.state !== 'EXCURSION' && figures.state !== 'BROKEN') return []
      const began = figures.state === 'BROKEN' ? figures.broken_at : figures.excursions.find((e) => e.ended_at === null)?.started_at
      return [
        {
          delivery_id: row.id,
          kind: figures.state === 'BROKEN' ? 'cold_chain_break' : 'cold_chain_excursion',
          since: began ?? row.updated_at,
          status: row.status as DeliveryStatus,
          driver_name: row.driver_name,
          pharmacy_name: row.pharmacy_name,
          items: itemNames(row.items),
        },
      ]
    })
    const exceptions = [
      ...coldChain,
      ...failed.map((f): OpenException => ({
        delivery_id: f.id,
        kind: 'failed',
        since: failedAt.get(f.id) ?? f.updated_at,
        status: 'FAILED',
        driver_name: f.driver_name,
        pharmacy_name: f.pharmacy_name,
        items: itemNames(f.items),
      })),
    ].sort((a, b) => (a.since < b.since ? 1 : -1))
    return {
      fleet_id: fleetId,
      timezone: fleet?.timezone ?? 'UTC',
      generated_at: iso(this.deps.clock.now()),
      counts,
      open_exceptions: {
        count: exceptions.length < LIST_LIMIT ? exceptions.length : await this.openExceptionCount(fleetId),
        items: exceptions.slice(0, LIST_LIMIT),
      },
      in_progress: { count: counts.DISPATCHED + counts.PICKED_UP, items: inProgress },
    }
  }

  private async positionOf(deliveryId: string, address: string | null): Promise<LastPosition | null> {
    const seen = await this.lastPosition(this.deps.db, deliveryId)
    if (!seen) return null
    const to = fromJson<Partial<LatLng> | null>(address)
    const distance = typeof to?.lat === 'number' && typeof to.lng === 'number' ? distanceMetres(seen, { lat: to.lat, lng: to.lng }) : null
    return {
      lat: seen.lat,
      lng: seen.lng,
      accuracy_m: seen.accuracy_m,
      at: seen.at,
      distance_m: distance === null ? null : Math.round(distance),
    }
  }

  /** When each delivery's latest failed attempt happened (its `failed` custody event's occurred_at). */
  private async failedAt(deliveryIds: readonly string[]): Promise<Map<string, string>> {
    if (deliveryIds.length === 0) return new Map()
    const rows = await this.deps.db
      .selectFrom('custody_events')
      .select(['delivery_id', (eb) => eb.fn.max('occurred_at').as('at')])
      .where('delivery_id', 'in', deliveryIds)
      .where('type', '=', 'failed')
      .groupBy('delivery_id')
      .execute()
    return new Map(rows.map((r) => [r.delivery_id, String(r.at)]))
  }

  private async openExceptionCount(fleetId: string): Promise<number> {
    const rows = await this.deps.db
      .selectFrom('deliveries')
      .select('cold_chain')
      .where('fleet_id', '=', fleetId)
      .where('status', 'in', ['DISPATCHED', 'PICKED_UP'])
      .execute()
    const coldChain = rows.filter((r) =>
      ['EXCURSION', 'BROKEN'].includes(fromJson<Partial<ColdChainFigures> | null>(r.cold_chain)?.state ?? ''),
    ).length
    const failed = await this.deps.db
      .selectFrom('deliveries')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('fleet_id', '=', fleetId)
      .where('status', '=', 'FAILED')
      .executeTakeFirstOrThrow()
    return coldChain + Number(failed.n)
  }

  private async onTime(fleetId: string, period: { from: string; to: string }): Promise<Dashboard['on_time']> {
    const row = await this.deps.db
      .selectFrom('deliveries')
      .select([(eb) => eb.fn.countAll().as('delivered'), (eb) => eb.fn.sum('on_time').as('on_time')])
      .where('fleet_id', '=', fleetId)
      .where('ended_at', '>=', period.from)
      .where('ended_at', '<', period.to)
      .where('on_time', 'is not', null)
      .executeTakeFirstOrThrow()
    const delivered = Number(row.delivered)
    const onTime = Number(row.on_time ?? 0)
    return { delivered, on_time: onTime, rate: delivered ? onTime / delivered : null }
  }

  private async payout(fleetId: string, period: { from: string; to: string }): Promise<Dashboard['payout']> {
    const reader = new PeriodReader(this.deps.db, fleetId, period)
    for await (const _line of reader.lines()) {
      /* the totals add up as the lines go by */
    }
    return {
      currency: await reader.currency(),
      lines: reader.totals.lines,
      gross_cents: reader.totals.gross_cents,
      payout_cents: reader.totals.payout_cents,
    }
  }
}

function figuresOf(row: Database['deliveries']): ColdChainFigures {
  return storedFigures(row.cold_chain_required === 1, fromJson<Partial<ColdChainFigures>>(row.cold_chain) ?? {})
}

/** The items' descriptions (an item without one: its NDC), never their quantities or anything of the patient. */
function itemNames(items: string | null): string[] {
  return (fromJson<{ description?: string; ndc?: string }[] | null>(items) ?? []).flatMap((i) => i.description ?? i.ndc ?? [])
}

function inProgressOf(
  row: Database['deliveries'] & { driver_name: string | null; pharmacy_name: string; items: string | null },
  lastPosition: LastPosition | null,
): InProgress {
  const figures = figuresOf(row)
  return {
    delivery_id: row.id,
    status: row.status as DeliveryStatus,
    driver_id: row.driver_id,
    driver_name: row.driver_name,
    pharmacy_name: row.pharmacy_name,
    items: itemNames(row.items),
    tote_id: row.tote_id,
    eta: row.live_eta ?? row.eta, // the live ETA once positions or the router gave one (docs/fleet.md)
    cold_chain: {
      required: row.cold_chain_required === 1,
      state: figures.state,
      min_c: figures.min_c ?? null,
      max_c: figures.max_c ?? null,
    },
    updated_at: row.updated_at,
    last_position: lastPosition,
  }
}

/** The calendar month (UTC) containing `nowMs`: [first day 00:00, first day of the next month). */
function currentMonth(nowMs: number): { from: string; to: string } {
  const now = new Date(nowMs)
  return {
    from: iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
    to: iso(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
  }
}
