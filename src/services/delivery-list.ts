import { sql, type SelectQueryBuilder } from 'kysely'
import type { Principal } from '../auth/scopes.js'
import type { CustodyEvent } from '../domain/custody.js'
import { validationFailed } from '../errors.js'
import { toCustodyEvent } from '../store/custody-rows.js'
import { decodeCursor, encodeCursor, paginate, type Page, type PageRequest } from '../store/pagination.js'
import type { Database } from '../store/schema.js'
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

/** A page of the deliveries the caller may see, each with its custody chain. */
export async function listDeliveries(
  { db, dialect }: Pick<ServiceDeps, 'db' | 'dialect'>,
  principal: Principal,
  filter: DeliveryFilter,
  page: PageRequest,
): Promise<Page<Delivery>> {
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
  return { data: result.data.map((r) => toDelivery(r, byDelivery.get(r.id) ?? [])), next_cursor: result.next_cursor }
}

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
