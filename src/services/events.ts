import type { Principal } from '../auth/scopes.js'
import { notFound } from '../errors.js'
import type { ServiceDeps } from './context.js'
import { envelopeFromRow, type EventEnvelope } from './outbox.js'
import { decodeCursor, encodeCursor, type Page } from './pagination.js'
import { canSee } from './tenancy.js'

/** Reads of the outbox for the token's tenant: what a consumer that was offline pulls. */
export class EventService {
  constructor(private readonly deps: ServiceDeps) {}

  async list(principal: Principal, q: { limit: number; cursor?: string | undefined; after?: string | undefined; type?: string | undefined; delivery_id?: string | undefined }): Promise<Page<EventEnvelope>> {
    const db = this.deps.db
    let query = db.selectFrom('events').selectAll()
    if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
    if (q.type) query = query.where('type', '=', q.type)
    if (q.delivery_id) query = query.where('delivery_id', '=', q.delivery_id)
    if (q.cursor) query = query.where('pos', '>', Number(decodeCursor(q.cursor)))
    else if (q.after) {
      // `after` names an event id: everything committed after it. Another tenant's event is
      // answered exactly like an unknown one, so its id tells nothing about it.
      const anchor = await db.selectFrom('events').select(['pos', 'pharmacy_id', 'fleet_id']).where('id', '=', q.after).executeTakeFirst()
      if (!anchor || !canSee(principal, anchor)) throw notFound('event')
      query = query.where('pos', '>', anchor.pos)
    }
    const rows = await query.orderBy('pos').limit(q.limit + 1).execute()
    const page = rows.slice(0, q.limit)
    return { data: page.map(envelopeFromRow), next_cursor: rows.length > q.limit ? encodeCursor(page.at(-1)!.pos) : null }
  }

  async get(principal: Principal, id: string): Promise<EventEnvelope> {
    const row = await this.deps.db.selectFrom('events').selectAll().where('id', '=', id).executeTakeFirst()
    if (!row || !canSee(principal, row)) throw notFound('event')
    return envelopeFromRow(row)
  }
}
