import type { Principal } from '../auth/scopes.js'
import { AppError, notFound } from '../errors.js'
import type { ServiceDeps } from './context.js'
import { EventFeed, type EventScope } from '../events/event-cursor.js'
import type { EventStreams } from '../events/event-stream.js'
import type { StreamRequest } from '../events/stream-subscription.js'
import { asException, exceptionTypes, isExceptionType } from '../events/exception-feed.js'
import { envelopeFromRow, type EventEnvelope } from '../events/outbox.js'
import type { Page } from '../store/pagination.js'
import { eventVisible } from './delivery-visibility.js'

type ListQuery = {
  limit: number
  cursor?: string | undefined
  after?: string | undefined
  type?: string | undefined
  delivery_id?: string | undefined
}

/** What a stream request asks for: filters, and where to resume (Last-Event-ID or `after`). */
export type StreamQuery = { types?: string[] | undefined; delivery_id?: string | undefined; after?: string | undefined }

/** How the HTTP layer closes a stream's connection, and the response to write frames to. */
export type StreamHooks = Pick<StreamRequest, 'onCutOff' | 'sink'>

/** Reads of the outbox for the token's tenant: what a consumer that was offline pulls, and the live streams. */
export class EventService {
  private readonly feed: EventFeed

  constructor(
    private readonly deps: ServiceDeps,
    private readonly streams?: EventStreams,
    /** Whether a token was revoked since it opened a stream (checked at every heartbeat). */
    private readonly isRevoked: (jti: string) => boolean = () => false,
  ) {
    this.feed = new EventFeed(deps)
  }

  async list(principal: Principal, q: ListQuery): Promise<Page<EventEnvelope>> {
    return this.page(tenantOf(principal), q)
  }

  async get(principal: Principal, id: string): Promise<EventEnvelope> {
    const row = await this.deps.db.selectFrom('events').selectAll().where('id', '=', id).executeTakeFirst()
    if (!(await eventVisible(this.deps.db, principal, row))) throw notFound('event')
    return envelopeFromRow(row!)
  }

  /** GET /v1/events/stream: the events GET /v1/events would list, live. */
  async stream(principal: Principal, q: StreamQuery, hooks: StreamHooks = {}): Promise<ReadableStream<Uint8Array>> {
    const tenant = tenantOf(principal)
    return this.open(principal, { ...tenant, types: q.types, deliveryId: q.delivery_id }, q.after, hooks)
  }

  /** GET /v1/fleets/{id}/exceptions: the fleet's exceptions, a page at a time. */
  async listExceptions(principal: Principal, fleetId: string, q: ListQuery): Promise<Page<EventEnvelope>> {
    await this.exceptionsVisible(principal, fleetId)
    const page = await this.page({ fleetId, driverId: principal.driverId, types: exceptionTypes }, q)
    return { data: page.data.map(asException), next_cursor: page.next_cursor }
  }

  /** GET /v1/fleets/{id}/exceptions/stream: the same, live. */
  async streamExceptions(
    principal: Principal,
    fleetId: string,
    q: StreamQuery,
    hooks: StreamHooks = {},
  ): Promise<ReadableStream<Uint8Array>> {
    await this.exceptionsVisible(principal, fleetId)
    const types = q.types ? q.types.filter(isExceptionType) : exceptionTypes
    return this.open(principal, { fleetId, driverId: principal.driverId, types, deliveryId: q.delivery_id }, q.after, hooks, asException)
  }

  private async page(scope: EventScope, q: ListQuery): Promise<Page<EventEnvelope>> {
    let cursor = q.cursor ?? null
    if (!cursor && q.after) cursor = await this.resumeAfter(q.after, scope)
    const page = await this.feed.readEventsAfter(cursor, q.limit, { ...scope, type: q.type, deliveryId: q.delivery_id })
    return { data: page.events, next_cursor: page.more ? page.cursor : null }
  }

  private async open(
    principal: Principal,
    scope: EventScope,
    after: string | undefined,
    hooks: StreamHooks,
    project?: (e: EventEnvelope) => EventEnvelope,
  ) {
    if (!this.streams) throw new AppError('not_ready', 'Live event streams are not available in this process.')
    const cursor = after ? await this.resumeAfter(after, scope) : null
    // The stream ends when the token that opened it expires or is revoked; the reader resumes with a fresh one.
    const endsInMs = principal.exp * 1_000 - this.deps.clock.now()
    const stillValid = () => !this.isRevoked(principal.jti)
    return this.streams.open({ tenant: streamTenant(principal), scope, after: cursor, project, endsInMs, stillValid, ...hooks })
  }

  /**
   * The cursor just after event `id`, which must be one the reader could have been shown: of its
   * tenant (another tenant's is as unknown as a made-up one), and of this feed.
   */
  private async resumeAfter(id: string, scope: EventScope): Promise<string> {
    const cursor = await this.feed.cursorAfter(id, scope)
    if (!cursor) throw notFound('event')
    return cursor
  }

  /**
   * A fleet's exception feed is the fleet's own: its tokens and unrestricted ones read it.
   * Another fleet's token gets 404 (as for everything of that fleet); a pharmacy token, which
   * may read fleets to dispatch to them, is refused with 403, as when it tries to change one.
   */
  private async exceptionsVisible(principal: Principal, fleetId: string): Promise<void> {
    if (principal.fleetId && principal.fleetId !== fleetId) throw notFound('fleet')
    const fleet = await this.deps.db.selectFrom('fleets').select('id').where('id', '=', fleetId).executeTakeFirst()
    if (!fleet) throw notFound('fleet')
    if (principal.pharmacyId)
      throw new AppError('insufficient_scope', "Only the fleet itself or an unrestricted client reads a fleet's exceptions.")
  }
}

/** What the token may see of the feed: its tenant's events, and a driver's only those of the deliveries assigned to them. */
const tenantOf = (principal: Principal): EventScope => ({
  pharmacyId: principal.pharmacyId,
  fleetId: principal.fleetId,
  driverId: principal.driverId,
})

/** Streams count per pharmacy, per fleet, and for the unrestricted clients together. */
const streamTenant = (principal: Principal) =>
  principal.pharmacyId ? `pharmacy:${principal.pharmacyId}` : principal.fleetId ? `fleet:${principal.fleetId}` : 'unrestricted'
