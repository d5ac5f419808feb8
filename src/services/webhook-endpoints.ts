import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { AppError, notFound, validationFailed } from '../errors.js'
import { newId } from '../ids.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { canSee } from '../auth/tenancy.js'
import { countOwned, createWithinLimit, type Owner } from './tenant-limits.js'
import type { Database, Executor } from '../store/schema.js'
import { subscribes } from '../events/fanout.js'
import { newWebhookSecret } from '../webhooks/signing.js'
import { refuseNonPublicTarget } from '../webhooks/ssrf.js'

// After a rotation the old secret keeps signing alongside the new one for 24 h.
const ROTATION_OVERLAP_MS = 24 * 3_600_000

export type Endpoint = {
  id: string
  url: string
  events: string[]
  description: string | null
  enabled: boolean
  disabled_reason: string | null
  pharmacy_id: string | null
  fleet_id: string | null
  created_at: string
  updated_at: string
}
export type Attempt = {
  id: string
  event_id: string
  attempt: number
  at: string
  status_code: number | null
  error: string | null
  duration_ms: number
  success: boolean
}

/** Webhook endpoints: registration, changes, secret rotation, attempts, redelivery. */
export class WebhookService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly allowPrivate: boolean,
    /** Endpoints one tenant may register (docs/api.md, Per-tenant limits): each is one more POST per event. */
    private readonly maxPerTenant = 20,
  ) {}

  /** The secret is shown once: `record` keeps the answer without it. */
  async create(
    principal: Principal,
    input: {
      url: string
      events: string[]
      description?: string | undefined
      pharmacy_id?: string | undefined
      fleet_id?: string | undefined
    },
    record?: RecordAnswer<Endpoint & { secret: string }>,
  ): Promise<Endpoint & { secret: string }> {
    await this.checkUrl(input.url)
    const tenant = await this.tenantFor(principal, input)
    const now = iso(this.deps.clock.now())
    const secret = newWebhookSecret()
    const row: Database['webhook_endpoints'] = {
      id: newId('wh'),
      kind: 'webhook',
      url: input.url,
      events: JSON.stringify(input.events),
      description: input.description ?? null,
      enabled: 1,
      disabled_reason: null,
      ...tenant,
      secret,
      previous_secret: null,
      previous_secret_expires_at: null,
      failing_since: null,
      created_at: now,
      updated_at: now,
    }
    const created = { ...toEndpoint(row), secret }
    await createWithinLimit(
      this.deps,
      { what: 'webhook endpoints', max: this.maxPerTenant, owner: tenant },
      (trx) => countOwned(trx, 'webhook_endpoints', tenant),
      async (trx) => {
        await refuseSameUrl(trx, tenant, input.url)
        await trx.insertInto('webhook_endpoints').values(row).execute()
        await record?.(trx, created)
      },
    )
    return created
  }

  async list(principal: Principal, page: PageRequest): Promise<Page<Endpoint>> {
    let query = this.deps.db.selectFrom('webhook_endpoints').selectAll().where('kind', '=', 'webhook')
    if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
    const result = await paginate(query, 'id', page)
    return { data: result.data.map(toEndpoint), next_cursor: result.next_cursor }
  }

  async get(principal: Principal, id: string): Promise<Endpoint> {
    return toEndpoint(await this.find(principal, id))
  }

  async update(
    principal: Principal,
    id: string,
    patch: { url?: string | undefined; events?: string[] | undefined; enabled?: boolean | undefined; description?: string | undefined },
  ): Promise<Endpoint> {
    const endpoint = await this.find(principal, id)
    if (patch.url) await this.checkUrl(patch.url)
    if (patch.url && patch.url !== endpoint.url) await refuseSameUrl(this.deps.db, endpoint, patch.url)
    const changes: Partial<Database['webhook_endpoints']> = { updated_at: iso(this.deps.clock.now()) }
    if (patch.url !== undefined) changes.url = patch.url
    if (patch.events !== undefined) changes.events = JSON.stringify(patch.events)
    if (patch.description !== undefined) changes.description = patch.description
    // Re-enabling clears the failure history: the operator says the receiver is fixed.
    if (patch.enabled !== undefined)
      Object.assign(changes, {
        enabled: patch.enabled ? 1 : 0,
        disabled_reason: patch.enabled ? null : 'disabled_by_user',
        ...(patch.enabled ? { failing_since: null } : {}),
      })
    await this.deps.db.updateTable('webhook_endpoints').set(changes).where('id', '=', id).execute()
    return this.get(principal, id)
  }

  async remove(principal: Principal, id: string): Promise<void> {
    await this.find(principal, id)
    await this.deps.db.transaction().execute(async (trx) => {
      await trx.deleteFrom('webhook_messages').where('endpoint_id', '=', id).where('state', '=', 'pending').execute()
      await trx.deleteFrom('webhook_endpoints').where('id', '=', id).execute()
    })
  }

  /** The new secret is shown once: `record` keeps the answer without it. */
  async rotateSecret(
    principal: Principal,
    id: string,
    record?: RecordAnswer<{ secret: string; previous_secret_expires_at: string }>,
  ): Promise<{ secret: string; previous_secret_expires_at: string }> {
    const endpoint = await this.find(principal, id)
    const secret = newWebhookSecret()
    const expiresAt = this.deps.clock.now() + ROTATION_OVERLAP_MS
    const rotated = { secret, previous_secret_expires_at: iso(expiresAt) }
    await this.deps.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('webhook_endpoints')
        .set({ secret, previous_secret: endpoint.secret, previous_secret_expires_at: expiresAt, updated_at: iso(this.deps.clock.now()) })
        .where('id', '=', id)
        .execute()
      await record?.(trx, rotated)
    })
    return rotated
  }

  async attempts(principal: Principal, id: string, page: PageRequest): Promise<Page<Attempt>> {
    await this.find(principal, id)
    const result = await paginate(this.deps.db.selectFrom('webhook_attempts').selectAll().where('endpoint_id', '=', id), 'id', page)
    return {
      data: result.data.map((a) => ({
        id: a.id,
        event_id: a.event_id,
        attempt: a.attempt,
        at: a.at,
        status_code: a.status_code,
        error: a.error,
        duration_ms: a.duration_ms,
        success: a.success === 1,
      })),
      next_cursor: result.next_cursor,
    }
  }

  /** Sends an event again to the caller's subscribed endpoints (or one of them), whatever happened before. */
  async redeliver(
    principal: Principal,
    eventId: string,
    endpointId?: string,
    record?: RecordAnswer<{ event_id: string; endpoint_ids: string[] }>,
  ): Promise<{ event_id: string; endpoint_ids: string[] }> {
    const db = this.deps.db
    const event = await db.selectFrom('events').selectAll().where('id', '=', eventId).executeTakeFirst()
    if (!event || !canSee(principal, event)) throw notFound('event')
    let query = db.selectFrom('webhook_endpoints').selectAll().where('kind', '=', 'webhook').where('enabled', '=', 1)
    if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
    if (endpointId) query = query.where('id', '=', endpointId)
    const endpoints = (await query.execute()).filter((e) => subscribes(JSON.parse(e.events), event.type) && reaches(e, event))
    if (endpointId && endpoints.length === 0)
      throw validationFailed([{ pointer: '/endpoint_id', message: 'no enabled endpoint of yours subscribed to this event' }])
    const now = this.deps.clock.now()
    const queued = { event_id: event.id, endpoint_ids: endpoints.map((e) => e.id) }
    await db.transaction().execute(async (trx) => {
      for (const endpoint of endpoints) await requeue(trx, event.id, endpoint.id, now)
      await record?.(trx, queued)
    })
    this.deps.outbox.committed(endpoints.length)
    return queued
  }

  private async find(principal: Principal, id: string): Promise<Database['webhook_endpoints']> {
    const row = await this.deps.db
      .selectFrom('webhook_endpoints')
      .selectAll()
      .where('id', '=', id)
      .where('kind', '=', 'webhook')
      .executeTakeFirst()
    if (!row) throw notFound('webhook endpoint')
    if (principal.pharmacyId && row.pharmacy_id !== principal.pharmacyId) throw notFound('webhook endpoint')
    if (principal.fleetId && row.fleet_id !== principal.fleetId) throw notFound('webhook endpoint')
    return row
  }

  private async checkUrl(url: string): Promise<void> {
    await refuseNonPublicTarget(url, '/url', { allowPrivate: this.allowPrivate })
  }

  /** A restricted token's endpoint hears its tenant; an admin may name one, or neither for all. */
  private async tenantFor(principal: Principal, input: { pharmacy_id?: string | undefined; fleet_id?: string | undefined }) {
    if (principal.pharmacyId || principal.fleetId) {
      if ((input.pharmacy_id && input.pharmacy_id !== principal.pharmacyId) || (input.fleet_id && input.fleet_id !== principal.fleetId)) {
        throw validationFailed([{ pointer: input.pharmacy_id ? '/pharmacy_id' : '/fleet_id', message: 'must be the tenant of your token' }])
      }
      return { pharmacy_id: principal.pharmacyId, fleet_id: principal.fleetId }
    }
    if (input.pharmacy_id && input.fleet_id)
      throw validationFailed([{ pointer: '/fleet_id', message: 'name a pharmacy or a fleet, not both' }])
    if (
      input.pharmacy_id &&
      !(await this.deps.db.selectFrom('pharmacies').select('id').where('id', '=', input.pharmacy_id).executeTakeFirst())
    ) {
      throw validationFailed([{ pointer: '/pharmacy_id', message: `no pharmacy ${input.pharmacy_id}` }])
    }
    if (input.fleet_id && !(await this.deps.db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst())) {
      throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
    }
    return { pharmacy_id: input.pharmacy_id ?? null, fleet_id: input.fleet_id ?? null }
  }
}

/** One URL, one endpoint per tenant: N endpoints at one URL would turn each event into N POSTs to it. */
async function refuseSameUrl(db: Executor, owner: Owner, url: string): Promise<void> {
  let query = db.selectFrom('webhook_endpoints').select('id').where('kind', '=', 'webhook').where('url', '=', url)
  query = owner.pharmacy_id === null ? query.where('pharmacy_id', 'is', null) : query.where('pharmacy_id', '=', owner.pharmacy_id)
  query = owner.fleet_id === null ? query.where('fleet_id', 'is', null) : query.where('fleet_id', '=', owner.fleet_id)
  const same = await query.executeTakeFirst()
  if (same) {
    throw new AppError('conflict', `Endpoint ${same.id} already receives this tenant's events at this URL; change its events instead.`, {
      errors: [{ pointer: '/url', message: `already registered as ${same.id}` }],
    })
  }
}

function reaches(endpoint: Database['webhook_endpoints'], event: { pharmacy_id: string | null; fleet_id: string | null }): boolean {
  if (!endpoint.pharmacy_id && !endpoint.fleet_id) return true
  return endpoint.pharmacy_id === event.pharmacy_id || (endpoint.fleet_id !== null && endpoint.fleet_id === event.fleet_id)
}

async function requeue(trx: Executor, eventId: string, endpointId: string, nowMs: number): Promise<void> {
  const existing = await trx
    .selectFrom('webhook_messages')
    .select('id')
    .where('event_id', '=', eventId)
    .where('endpoint_id', '=', endpointId)
    .executeTakeFirst()
  if (existing) {
    await trx
      .updateTable('webhook_messages')
      .set({ state: 'pending', next_attempt_at: nowMs, lease_until: null })
      .where('id', '=', existing.id)
      .execute()
  } else {
    await trx
      .insertInto('webhook_messages')
      .values({
        id: newId('msg'),
        event_id: eventId,
        endpoint_id: endpointId,
        state: 'pending',
        attempts: 0,
        next_attempt_at: nowMs,
        lease_until: null,
        created_at: nowMs,
      })
      .execute()
  }
}

function toEndpoint(row: Database['webhook_endpoints']): Endpoint {
  return {
    id: row.id,
    url: row.url,
    events: JSON.parse(row.events),
    description: row.description,
    enabled: row.enabled === 1,
    disabled_reason: row.disabled_reason,
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}
