import type { Principal } from '../auth/scopes.js'
import { notFound } from '../errors.js'
import type { ServiceDeps } from './context.js'
import { EventFeed } from '../events/event-cursor.js'
import { envelopeFromRow, type EventEnvelope } from '../events/outbox.js'
import type { Page } from '../store/pagination.js'
import { canSee } from '../auth/tenancy.js'

/** Reads of the outbox for the token's tenant: what a consumer that was offline pulls. */
export class EventService {
  private readonly feed: EventFeed

  constructor(private readonly deps: ServiceDeps) {
    this.feed = new EventFeed(deps)
  }

  async list(principal: Principal, q: { limit: number; cursor?: string | undefined; after?: string | undefined; type?: string | undefined; delivery_id?: string | undefined }): Promise<Page<EventEnvelope>> {
    const tenant = { pharmacyId: principal.pharmacyId, fleetId: principal.fleetId }
    let cursor = q.cursor ?? null
    if (!cursor && q.after) {
      // `after` names an event id: everything after it in the feed. Another tenant's is as unknown as a made-up one.
      cursor = await this.feed.cursorAfter(q.after, tenant)
      if (!cursor) throw notFound('event')
    }
    const page = await this.feed.readEventsAfter(cursor, q.limit, { ...tenant, type: q.type, deliveryId: q.delivery_id })
    return { data: page.events, next_cursor: page.more ? page.cursor : null }
  }

  async get(principal: Principal, id: string): Promise<EventEnvelope> {
    const row = await this.deps.db.selectFrom('events').selectAll().where('id', '=', id).executeTakeFirst()
    if (!row || !canSee(principal, row)) throw notFound('event')
    return envelopeFromRow(row)
  }
}
