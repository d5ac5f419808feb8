import { roundCelsius } from '../../rules/events.js'
import type { Principal } from '../auth/scopes.js'
import { iso, type Clock } from '../clock.js'
import type { CustodyEvent } from '../domain/custody.js'
import {
  EPCIS_CUSTODY_TYPES,
  epcisContext,
  epcisDocument,
  objectEvents,
  sensorIntervals,
  type EpcisDelivery,
  type EpcisItem,
  type EpcisPharmacy,
  type IntervalReadings,
  type ObjectEvent,
} from '../domain/epcis.js'
import { validationFailed } from '../errors.js'
import { toCustodyEvent } from '../store/custody-rows.js'
import { decodeCursor, encodeCursor } from '../store/pagination.js'
import { fromJson, type Db } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/sink.js'
import type { DeliveryService } from './deliveries.js'

export type EpcisDeps = { db: Db; sink: ReadingSink; clock: Clock; deliveries: DeliveryService; baseUrl: string }

/** `GET /v1/epcis/events`: a window of record time, and a page of it. */
export type EventQuery = { from?: string | undefined; to?: string | undefined; limit: number; cursor?: string | undefined }

/** A page of events as the pieces of its JSON text, produced as they are read: memory stays flat however large the page. */
export type EventPage = { nextCursor: string | null; chunks: AsyncIterable<string> }

/** Custody rows are read this many at a time while a page streams: one query per batch for the deliveries behind them. */
const BATCH = 500

type EventKey = { delivery_id: string; seq: number }

/** The delivery's custody chain with its temperature evidence as GS1 EPCIS 2.0 (docs/interop.md, EPCIS). */
export class EpcisService {
  constructor(private readonly deps: EpcisDeps) {}

  /** The EPCISDocument of one delivery the caller may see (404 otherwise). */
  async document(principal: Principal, deliveryId: string) {
    const delivery = await this.deps.deliveries.get(principal, deliveryId)
    const [items, pharmacy] = await Promise.all([this.itemsOf([delivery.rx_id]), this.pharmacies([delivery.pharmacy_id])])
    const events = await this.eventsOf(delivery, items.get(delivery.rx_id) ?? [], pharmacy.get(delivery.pharmacy_id)!)
    return epcisDocument(events, iso(this.deps.clock.now()))
  }

  /**
   * A page of every EPCIS event of the caller's tenant, recorded in [from, to), in the order
   * recorded (EPCIS recordTime: a partner pulling by position misses no late-synced handoff). The
   * page's end is found first, so the next cursor heads the document; the events follow, read in
   * batches as the response is consumed.
   */
  async page(principal: Principal, query: EventQuery): Promise<EventPage> {
    const after = query.cursor ? decodePosition(query.cursor) : 0
    const boundary = await this.positions(principal, query, after, null)
      .offset(query.limit - 1)
      .limit(2)
      .execute()
    const last = boundary[0]?.pos ?? null
    const nextCursor = boundary.length === 2 && last !== null ? encodeCursor(Number(last)) : null
    const head = {
      '@context': epcisContext,
      type: 'EPCISQueryDocument',
      schemaVersion: '2.0',
      creationDate: iso(this.deps.clock.now()),
      'rxtrace:nextCursor': nextCursor,
    }
    const until = nextCursor ? Number(last) : null
    const self = this
    async function* chunks(): AsyncGenerator<string> {
      yield `${JSON.stringify(head).slice(0, -1)},"epcisBody":{"queryResults":{"queryName":"SimpleEventQuery","resultsBody":{"eventList":[`
      let cursor = after
      let separator = ''
      for (let left = query.limit; left > 0;) {
        const keys = await self.positions(principal, query, cursor, until).limit(Math.min(BATCH, left)).execute()
        if (!keys.length) break
        left -= keys.length
        cursor = Number(keys.at(-1)!.pos)
        for (const event of await self.eventsAt(keys)) {
          yield separator + JSON.stringify(event)
          separator = ','
        }
      }
      yield ']}}}}'
    }
    return { nextCursor, chunks: chunks() }
  }

  /** The tenant's EPCIS events after position `after` (up to `until`), in the order recorded, through the tenant's index. */
  private positions(principal: Principal, query: EventQuery, after: number, until: number | null) {
    let q = this.deps.db.selectFrom('epcis_events as e').select(['e.pos', 'e.delivery_id', 'e.seq']).where('e.pos', '>', after)
    if (until !== null) q = q.where('e.pos', '<=', until)
    if (principal.pharmacyId) q = q.where('e.pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) q = q.where('e.fleet_id', '=', principal.fleetId)
    // A driver user: the deliveries assigned to them now, as every other read of theirs.
    if (principal.driverId)
      q = q.where('e.delivery_id', 'in', (eb) => eb.selectFrom('deliveries').select('id').where('driver_id', '=', principal.driverId!))
    if (query.from) q = q.where('e.recorded_at', '>=', query.from)
    if (query.to) q = q.where('e.recorded_at', '<', query.to)
    return q.orderBy('e.pos')
  }

  /** The events of these custody keys, in the keys' order, reading each delivery once. */
  private async eventsAt(keys: readonly EventKey[]): Promise<ObjectEvent[]> {
    const db = this.deps.db
    const deliveryIds = [...new Set(keys.map((k) => k.delivery_id))]
    const rows = await db
      .selectFrom('deliveries')
      .select(['id', 'rx_id', 'pharmacy_id', 'tote_id', 'created_at', 'cold_chain_required', 'cold_chain', 'disposition'])
      .where('id', 'in', deliveryIds)
      .execute()
    // Only the events that name an interval's ends: the binding start and the handoffs.
    const custody = await db
      .selectFrom('custody_events')
      .selectAll()
      .where('delivery_id', 'in', deliveryIds)
      .where('type', 'in', ['dispatched', ...EPCIS_CUSTODY_TYPES])
      .orderBy('delivery_id')
      .orderBy('seq')
      .execute()
    const chains = new Map<string, CustodyEvent[]>()
    for (const row of custody) chains.set(row.delivery_id, [...(chains.get(row.delivery_id) ?? []), toCustodyEvent(row)])
    const [items, pharmacies] = await Promise.all([
      this.itemsOf(rows.map((r) => r.rx_id)),
      this.pharmacies([...new Set(rows.map((r) => r.pharmacy_id))]),
    ])
    const wanted = new Map<string, Set<number>>()
    for (const k of keys) wanted.set(k.delivery_id, (wanted.get(k.delivery_id) ?? new Set()).add(k.seq))
    const byKey = new Map<string, ObjectEvent>()
    await Promise.all(
      rows.map(async (row) => {
        const stored = fromJson<{ excursions?: EpcisDelivery['cold_chain']['excursions'] } | null>(row.cold_chain)
        const delivery: EpcisDelivery = {
          id: row.id,
          tote_id: row.tote_id,
          created_at: row.created_at,
          custody: chains.get(row.id) ?? [],
          cold_chain: {
            required: row.cold_chain_required === 1,
            excursions: stored?.excursions ?? [],
            disposition: fromJson(row.disposition),
          },
        }
        const events = await this.eventsOf(delivery, items.get(row.rx_id) ?? [], pharmacies.get(row.pharmacy_id)!, wanted.get(row.id))
        for (const event of events) byKey.set(`${row.id}/${event['rxtrace:custodySeq'] as number}`, event)
      }),
    )
    return keys.flatMap((k) => byKey.get(`${k.delivery_id}/${k.seq}`) ?? [])
  }

  /** One delivery's events (those of `only`), with the readings of their sensor intervals. */
  private async eventsOf(
    delivery: EpcisDelivery,
    items: readonly EpcisItem[],
    pharmacy: EpcisPharmacy,
    only?: ReadonlySet<number>,
  ): Promise<ObjectEvent[]> {
    const intervals = sensorIntervals(delivery).filter((i) => !only || only.has(i.seq))
    const readings = new Map<number, IntervalReadings>()
    await Promise.all(
      intervals.map(async (interval) => {
        const figures = await this.readingsBetween(delivery.id, interval.fromMs, interval.toMs)
        if (figures) readings.set(interval.seq, figures)
      }),
    )
    return objectEvents({ delivery, items, pharmacy, baseUrl: this.deps.baseUrl, readings }, only)
  }

  /**
   * Minimum, maximum and mean of the readings in [from, to): the store aggregates them in steps as
   * long as the interval (aligned to the epoch, so at most two), which are combined here.
   */
  private async readingsBetween(deliveryId: string, fromMs: number, toMs: number): Promise<IntervalReadings | null> {
    if (toMs <= fromMs) return null
    const buckets = await this.deps.sink.bucketed(deliveryId, fromMs, toMs, toMs - fromMs)
    const n = buckets.reduce((sum, b) => sum + b.n, 0)
    if (n === 0) return null
    return {
      min: Math.min(...buckets.map((b) => b.min)),
      max: Math.max(...buckets.map((b) => b.max)),
      mean: roundCelsius(buckets.reduce((sum, b) => sum + b.avg * b.n, 0) / n),
      n,
    }
  }

  private async itemsOf(rxIds: readonly string[]): Promise<Map<string, EpcisItem[]>> {
    if (!rxIds.length) return new Map()
    const rows = await this.deps.db.selectFrom('prescriptions').select(['id', 'items']).where('id', 'in', rxIds).execute()
    return new Map(rows.map((r) => [r.id, fromJson<EpcisItem[] | null>(r.items) ?? []]))
  }

  private async pharmacies(ids: readonly string[]): Promise<Map<string, EpcisPharmacy>> {
    if (!ids.length) return new Map()
    const rows = await this.deps.db.selectFrom('pharmacies').select(['id', 'gln', 'timezone']).where('id', 'in', ids).execute()
    return new Map(rows.map((row) => [row.id, row]))
  }
}

/** Cursors are the position of a page's last event (the pagination module's opaque form). */
function decodePosition(cursor: string): number {
  const pos = Number(decodeCursor(cursor))
  if (!Number.isSafeInteger(pos) || pos < 0)
    throw validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
  return pos
}
