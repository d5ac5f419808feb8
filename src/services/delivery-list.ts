import { sql, type SelectQueryBuilder } from 'kysely'
import type { Principal } from '../auth/scopes.js'
import type { CustodyEvent } from '../domain/custody.js'
import { distanceM } from '../domain/eta.js'
import { AppError, validationFailed } from '../errors.js'
import { toCustodyEvent } from '../store/custody-rows.js'
import { decodeCursor, encodeCursor, paginate, type Page, type PageRequest } from '../store/pagination.js'
import { fromJson, type Database } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { toDelivery, type Delivery } from './delivery-shapes.js'

export type DeliveryFilter = {
  status?: string | undefined
  pharmacy_id?: string | undefined
  /** The cold chain's state (OK, EXCURSION, BROKEN, UNMONITORED). */
  cold_chain_state?: string | undefined
  /** Created at or after / before these instants (RFC 3339 UTC, compared as text like every stored time). */
  created_from?: string | undefined
  created_to?: string | undefined
  /** `attention`: the pharmacist's queue (BROKEN undecided, then EXCURSION, then the rest; newest first in each). Default: by id. */
  order?: 'id' | 'attention' | undefined
}

/**
 * What a list item may carry besides the delivery, so a queue shows what a pharmacist knows a
 * shipment by without a request per row: `prescription` (patient reference, items, deliver_by;
 * needs `prescriptions:read`, as reading the prescription itself does), `driver` (id and name) and
 * `last_position` (where the driver was last seen, for deliveries in progress).
 */
export const deliveryExpansions = ['prescription', 'driver', 'last_position'] as const
export type DeliveryExpansion = (typeof deliveryExpansions)[number]

/** A page of the deliveries the caller may see, each with its custody chain. */
export async function listDeliveries(
  { db, dialect }: Pick<ServiceDeps, 'db' | 'dialect'>,
  principal: Principal,
  filter: DeliveryFilter,
  page: PageRequest,
  expand: readonly DeliveryExpansion[] = [],
): Promise<Page<Delivery>> {
  if (expand.includes('prescription') && !principal.scopes.has('prescriptions:read'))
    throw new AppError('insufficient_scope', 'expand=prescription needs the prescriptions:read scope.')
  let query = db.selectFrom('deliveries').selectAll()
  if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
  if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
  if (principal.driverId) query = query.where('driver_id', '=', principal.driverId)
  if (filter.status) query = query.where('status', '=', filter.status)
  if (filter.pharmacy_id) query = query.where('pharmacy_id', '=', filter.pharmacy_id)
  if (filter.cold_chain_state) {
    const state = dialect === 'postgres' ? sql<string>`(cold_chain::jsonb ->> 'state')` : sql<string>`json_extract(cold_chain, '$.state')`
    query = query.where(state, '=', filter.cold_chain_state)
  }
  if (filter.created_from) query = query.where('created_at', '>=', filter.created_from)
  if (filter.created_to) query = query.where('created_at', '<', filter.created_to)
  const result = filter.order === 'attention' ? await attentionPage(query, page) : await paginate(query, 'id', page)
  const ids = result.data.map((r) => r.id)
  const custody = ids.length
    ? await db.selectFrom('custody_events').selectAll().where('delivery_id', 'in', ids).orderBy('seq').execute()
    : []
  const byDelivery = new Map<string, CustodyEvent[]>()
  for (const row of custody) byDelivery.set(row.delivery_id, [...(byDelivery.get(row.delivery_id) ?? []), toCustodyEvent(row)])
  const data = result.data.map((r) => toDelivery(r, byDelivery.get(r.id) ?? []))
  if (ids.length && expand.length) await expandPage(db, data, expand)
  return { data, next_cursor: result.next_cursor }
}

/** One query per expansion for the whole page (never one per row). */
async function expandPage(db: ServiceDeps['db'], data: Delivery[], expand: readonly DeliveryExpansion[]): Promise<void> {
  if (expand.includes('prescription')) {
    const rows = await db
      .selectFrom('prescriptions')
      .select(['delivery_id', 'patient_id', 'items', 'deliver_by', 'external_ref'])
      .where(
        'delivery_id',
        'in',
        data.map((d) => d.id),
      )
      .execute()
    const byDelivery = new Map(rows.map((r) => [r.delivery_id, r]))
    for (const d of data) {
      const rx = byDelivery.get(d.id)
      if (rx)
        d.prescription = {
          patient_id: rx.patient_id,
          items: fromJson<NonNullable<Delivery['prescription']>['items']>(rx.items),
          deliver_by: rx.deliver_by,
          external_ref: rx.external_ref,
        }
    }
  }
  if (expand.includes('driver')) {
    const driverIds = [...new Set(data.flatMap((d) => (d.driver_id ? [d.driver_id] : [])))]
    const names = driverIds.length ? await db.selectFrom('drivers').select(['id', 'name']).where('id', 'in', driverIds).execute() : []
    const byId = new Map(names.map((n) => [n.id, n.name]))
    for (const d of data) d.driver = d.driver_id ? { id: d.driver_id, name: byId.get(d.driver_id) ?? null } : null
  }
  if (expand.includes('last_position')) {
    // The newest position of each delivery in progress on the page ((delivery_id, at) is unique and indexed),
    // and how far it is from the door when the address has coordinates, as the fleet embed says it.
    const moving = data.filter((d) => IN_PROGRESS.has(d.status)).map((d) => d.id)
    const rows = moving.length
      ? await db
          .selectFrom('driver_positions as p')
          .innerJoin('prescriptions', 'prescriptions.delivery_id', 'p.delivery_id')
          .select(['p.delivery_id', 'p.lat', 'p.lng', 'p.accuracy_m', 'p.at', 'prescriptions.delivery_address'])
          .where('p.delivery_id', 'in', moving)
          .where((eb) =>
            eb(
              'p.at',
              '=',
              eb
                .selectFrom('driver_positions as q')
                .select((q) => q.fn.max('q.at').as('at'))
                .whereRef('q.delivery_id', '=', 'p.delivery_id'),
            ),
          )
          .execute()
      : []
    const byDelivery = new Map(
      rows.map((r) => {
        const at = { lat: Number(r.lat), lng: Number(r.lng) }
        const door = fromJson<Record<string, unknown> | null>(r.delivery_address)
        const distance =
          typeof door?.lat === 'number' && typeof door.lng === 'number' ? distanceM(at, { lat: door.lat, lng: door.lng }) : null
        return [
          r.delivery_id,
          { ...at, accuracy_m: Number(r.accuracy_m), at: r.at, distance_m: distance === null ? null : Math.round(distance) },
        ]
      }),
    )
    for (const d of data) d.last_position = byDelivery.get(d.id) ?? null
  }
}

const IN_PROGRESS = new Set(['DISPATCHED', 'PICKED_UP'])

/**
 * Keyset pagination over (attention asc, id desc), the index of migration 0012; the cursor
 * carries both keys (`<rank>.<id>`).
 */
async function attentionPage<O extends { id: string }>(
  query: SelectQueryBuilder<Database, 'deliveries', O>,
  { limit, cursor }: PageRequest,
): Promise<Page<O>> {
  // A generated column (never written, so not in the Database type the writers use).
  const attention = sql<number>`attention`
  let q = query.select(attention.as('attention_rank'))
  if (cursor) {
    const [rank, id] = decodeCursor(cursor).split('.')
    if (!/^[0-2]$/.test(rank ?? '') || !id)
      throw validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
    q = q.where((eb) => eb.or([eb(attention, '>', Number(rank)), eb.and([eb(attention, '=', Number(rank)), eb('id', '<', id)])]))
  }
  const rows = await q
    .orderBy(attention)
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute()
  const data = rows.slice(0, limit)
  const last = data.at(-1)
  return { data, next_cursor: rows.length > limit && last ? encodeCursor(`${last.attention_rank}.${last.id}`) : null }
}
