import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { notFound } from '../errors.js'
import { newId } from '../ids.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { countOwned, createWithinLimit } from './tenant-limits.js'
import type { Database } from '../store/schema.js'
import { endpointTenant, refuseSameUrl } from './webhook-endpoint-tenancy.js'
import { redeliver } from './webhook-redelivery.js'
import { newWebhookSecret } from '../webhooks/signing.js'
import { refuseNonPublicTarget } from '../webhooks/ssrf.js'
import { sealingContext } from '../store/sealed-secrets.js'

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
  /** `v1` (HMAC with the endpoint's secret, default) or `v1a` (the service's Ed25519 keys). */
  signature_scheme: SignatureScheme
  created_at: string
  updated_at: string
}
export const signatureSchemes = ['v1', 'v1a'] as const
export type SignatureScheme = (typeof signatureSchemes)[number]
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
      signature_scheme?: SignatureScheme | undefined
    },
    record?: RecordAnswer<Endpoint & { secret: string }>,
  ): Promise<Endpoint & { secret: string }> {
    await this.checkUrl(input.url)
    const tenant = await endpointTenant(this.deps.db, principal, input)
    const now = iso(this.deps.clock.now())
    const secret = newWebhookSecret()
    const id = newId('wh')
    const row: Database['webhook_endpoints'] = {
      id,
      kind: 'webhook',
      url: input.url,
      events: JSON.stringify(input.events),
      description: input.description ?? null,
      enabled: 1,
      disabled_reason: null,
      ...tenant,
      secret: this.deps.secrets.seal(sealingContext('webhook_endpoints', id), secret),
      previous_secret: null,
      previous_secret_expires_at: null,
      failing_since: null,
      created_at: now,
      updated_at: now,
      signature_scheme: input.signature_scheme ?? 'v1',
      body_format: 'rxtrace',
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
    patch: {
      url?: string | undefined
      events?: string[] | undefined
      enabled?: boolean | undefined
      description?: string | undefined
      signature_scheme?: SignatureScheme | undefined
    },
  ): Promise<Endpoint> {
    const endpoint = await this.find(principal, id)
    if (patch.url) await this.checkUrl(patch.url)
    if (patch.url && patch.url !== endpoint.url) await refuseSameUrl(this.deps.db, endpoint, patch.url)
    const changes: Partial<Database['webhook_endpoints']> = { updated_at: iso(this.deps.clock.now()) }
    if (patch.url !== undefined) changes.url = patch.url
    if (patch.events !== undefined) changes.events = JSON.stringify(patch.events)
    if (patch.description !== undefined) changes.description = patch.description
    if (patch.signature_scheme !== undefined) changes.signature_scheme = patch.signature_scheme
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
    // The current secret, sealed for this row, becomes the previous one as it is.
    const sealed = this.deps.secrets.seal(sealingContext('webhook_endpoints', id), secret)
    await this.deps.db.transaction().execute(async (trx) => {
      await trx
        .updateTable('webhook_endpoints')
        .set({
          secret: sealed,
          previous_secret: endpoint.secret,
          previous_secret_expires_at: expiresAt,
          updated_at: iso(this.deps.clock.now()),
        })
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
  redeliver(
    principal: Principal,
    eventId: string,
    endpointId?: string,
    record?: RecordAnswer<{ event_id: string; endpoint_ids: string[] }>,
  ): Promise<{ event_id: string; endpoint_ids: string[] }> {
    return redeliver(this.deps, principal, eventId, endpointId, record)
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
    signature_scheme: row.signature_scheme,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}
