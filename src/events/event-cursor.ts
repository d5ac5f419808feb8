import { sql } from 'kysely'
import { validationFailed } from '../errors.js'
import type { Dialect } from '../store/database.js'
import type { Db } from '../store/schema.js'
import { envelopeFromRow, type EventEnvelope } from './outbox.js'
import { decodeCursor, encodeCursor } from '../store/pagination.js'

/** Which events a reader may see (its tenant) and wants (a type, a delivery). */
export type EventScope = {
  pharmacyId?: string | null | undefined
  fleetId?: string | null | undefined
  /** A driver user's: only the events of the deliveries assigned to that driver now (what GET /v1/deliveries lists them). */
  driverId?: string | null | undefined
  type?: string | undefined
  /** Any of these types (the streams' comma-separated `type`); with `type`, both must hold. */
  types?: readonly string[] | undefined
  deliveryId?: string | undefined
}

/** A page of the feed: `cursor` stands after its last event (or where the read started), `more` when the page was full. */
export type EventsAfter = { events: EventEnvelope[]; cursor: string | null; more: boolean }

/** Just after one event: its writer's transaction id (PostgreSQL only) and its position. */
export type Position = { txid: string | null; pos: number }

/**
 * An event with where it stands in the feed (its cursor is the cursor just after it), and, when
 * read for the live streams, the driver its delivery is assigned to (null: none, or no delivery).
 */
export type PositionedEvent = { event: EventEnvelope; position: Position; cursor: string; driverId?: string | null }

/** The feed's order: negative when `a` comes before `b`. */
export function comparePositions(a: Position, b: Position): number {
  if (a.txid !== null && b.txid !== null && a.txid !== b.txid) return BigInt(a.txid) < BigInt(b.txid) ? -1 : 1
  return a.pos - b.pos
}

/**
 * Whether an event belongs to `scope`: the same test the SQL of `readEventsAfter` makes. A
 * driver's scope needs the event read `withDriver`; without it nothing is in a driver's scope.
 */
export function inScope({ event, driverId }: Pick<PositionedEvent, 'event' | 'driverId'>, scope: EventScope): boolean {
  if (scope.pharmacyId && event.pharmacy_id !== scope.pharmacyId) return false
  if (scope.fleetId && event.fleet_id !== scope.fleetId) return false
  if (scope.driverId && driverId !== scope.driverId) return false
  if (scope.type && event.type !== scope.type) return false
  if (scope.types && !scope.types.includes(event.type)) return false
  if (scope.deliveryId && event.delivery_id !== scope.deliveryId) return false
  return true
}

/**
 * The outbox read as a feed that never skips: whoever reads it page after page, passing back the
 * cursor it got, sees every committed event exactly once, in one order that never changes.
 *
 * SQLite has one writer at a time, so positions are handed out in commit order and "position
 * after the cursor" is the whole story. On PostgreSQL positions come from a sequence: a
 * transaction can take a position and commit after another that took a later one, and a reader
 * that had moved past the later one would never see it. So each event keeps the id of the
 * transaction that wrote it (`txid`, xid8), the feed is ordered by (txid, pos), and an event is
 * listed only once every transaction with a lower id has ended — its id is below
 * `pg_snapshot_xmin(pg_current_snapshot())`, the oldest transaction still running. Nothing can
 * then commit before it in the feed's order (the transactional-outbox technique). The price: an
 * event waits for the transactions that were running when it was written, for as long as they
 * run — typically milliseconds.
 */
export class EventFeed {
  constructor(private readonly store: { db: Db; dialect: Dialect }) {}

  /** Up to `limit` events after `cursor` (null: from the first event), in feed order. */
  async readEventsAfter(cursor: string | null, limit: number, scope: EventScope = {}): Promise<EventsAfter> {
    const page = await this.readPositioned(cursor, limit, scope)
    return { events: page.events.map((e) => e.event), cursor: page.cursor, more: page.more }
  }

  /**
   * `readEventsAfter` with each event's position, for readers that merge the feed with live events;
   * `withDriver` adds the driver each event's delivery is assigned to (the live streams' tail, which
   * reads for every stream at once and sorts events to them in memory).
   */
  async readPositioned(
    cursor: string | null,
    limit: number,
    scope: EventScope = {},
    { withDriver = false } = {},
  ): Promise<{ events: PositionedEvent[]; cursor: string | null; more: boolean }> {
    const after = cursor === null ? null : await this.positionOf(cursor)
    const postgres = this.store.dialect === 'postgres'
    let query = this.scoped(scope).selectAll('events').select(txidOf(postgres)).select(driverOf(withDriver))
    if (scope.type) query = query.where('type', '=', scope.type)
    if (scope.types) query = scope.types.length ? query.where('type', 'in', [...scope.types]) : query.where(sql<boolean>`1 = 0`)
    if (scope.deliveryId) query = query.where('delivery_id', '=', scope.deliveryId)
    if (postgres) {
      if (after) query = query.where(sql<boolean>`(txid, pos) > (${after.txid}::xid8, ${after.pos})`)
      query = query
        .where(sql<boolean>`txid < pg_snapshot_xmin(pg_current_snapshot())`)
        .orderBy(sql`events.txid`)
        .orderBy('pos')
    } else {
      if (after) query = query.where('pos', '>', after.pos)
      query = query.orderBy('pos')
    }
    const rows = await query.limit(limit + 1).execute()
    const page = rows.slice(0, limit).map((row) => ({
      event: envelopeFromRow(row),
      position: { txid: row.writer_txid, pos: row.pos },
      cursor: encodePosition(row),
      ...(withDriver ? { driverId: row.delivery_driver_id } : {}),
    }))
    return { events: page, cursor: page.at(-1)?.cursor ?? cursor, more: rows.length > limit }
  }

  /**
   * The cursor after the last event listed today (null: the feed is empty): a reader that starts
   * there gets every event listed from now on, and none listed before.
   */
  async head(): Promise<{ cursor: string | null; position: Position | null }> {
    const postgres = this.store.dialect === 'postgres'
    let query = this.store.db.selectFrom('events').select(['pos', txidOf(postgres)])
    if (postgres) {
      query = query
        .where(sql<boolean>`txid < pg_snapshot_xmin(pg_current_snapshot())`)
        .orderBy(sql`events.txid`, 'desc')
        .orderBy('pos', 'desc')
    } else {
      query = query.orderBy('pos', 'desc')
    }
    const row = await query.limit(1).executeTakeFirst()
    return row ? { cursor: encodePosition(row), position: { txid: row.writer_txid, pos: row.pos } } : { cursor: null, position: null }
  }

  /** The position a cursor this feed returned stands at. */
  position(cursor: string): Promise<Position> {
    return this.positionOf(cursor)
  }

  /** The cursor just after event `id`, or null when the reader's tenant has no such event. */
  async cursorAfter(id: string, scope: Pick<EventScope, 'pharmacyId' | 'fleetId' | 'driverId'> = {}): Promise<string | null> {
    const postgres = this.store.dialect === 'postgres'
    const row = await this.scoped(scope)
      .select(['pos', txidOf(postgres)])
      .where('id', '=', id)
      .executeTakeFirst()
    return row ? encodePosition(row) : null
  }

  private scoped(scope: EventScope) {
    let query = this.store.db.selectFrom('events')
    if (scope.pharmacyId) query = query.where('pharmacy_id', '=', scope.pharmacyId)
    if (scope.fleetId) query = query.where('fleet_id', '=', scope.fleetId)
    if (scope.driverId) query = query.where('events.delivery_id', 'in', assignedTo(this.store.db, scope.driverId))
    return query
  }

  private async positionOf(cursor: string): Promise<Position> {
    const text = decodeCursor(cursor)
    const match = /^(?:(\d{1,20})\.)?(\d{1,15})$/.exec(text)
    if (!match) throw invalidCursor()
    const pos = Number(match[2])
    if (this.store.dialect !== 'postgres') return { txid: null, pos }
    if (match[1]) return { txid: match[1], pos }
    // A cursor from before events kept their transaction id: find it from the position.
    const row = await this.store.db.selectFrom('events').select(txidOf(true)).where('pos', '=', pos).executeTakeFirst()
    if (!row?.writer_txid) throw invalidCursor()
    return { txid: row.writer_txid, pos }
  }
}

// As text: an xid8 may exceed 2^53.
const txidOf = (postgres: boolean) => (postgres ? sql<string | null>`events.txid::text` : sql<string | null>`null`).as('writer_txid')

// The driver a delivery is assigned to now; one primary-key lookup per event read.
const driverOf = (wanted: boolean) =>
  (wanted ? sql<string | null>`(select d.driver_id from deliveries d where d.id = events.delivery_id)` : sql<string | null>`null`).as(
    'delivery_driver_id',
  )

/** The deliveries assigned to a driver now (index deliveries_driver, migration 0017). */
const assignedTo = (db: Db, driverId: string) =>
  db.selectFrom('deliveries').select('deliveries.id').where('deliveries.driver_id', '=', driverId)

const encodePosition = ({ writer_txid, pos }: { writer_txid: string | null; pos: number }) =>
  encodeCursor(writer_txid === null ? String(pos) : `${writer_txid}.${pos}`)

const invalidCursor = () => validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
