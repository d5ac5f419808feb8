import type { AttemptRecord, ClaimRequest, DeliveryQueue, PendingDelivery } from '../../src/webhooks/delivery-queue.js'

interface Row {
  id: string
  endpointId: string
  eventId: string
  body: string
  attempt: number
  nextAttemptAtMs: number | null
  leasedUntilMs: number
  state: 'pending' | 'delivered' | 'failed'
}

interface Endpoint {
  url: string
  secrets: string[]
  failingSinceMs: number | null
  disabled: null | '410' | '5_days'
}

/**
 * The `DeliveryQueue` contract kept in memory, for tests: what the SQLite and PostgreSQL
 * adapters must do too (leases, per-endpoint limit, exclusions, disabled endpoints).
 */
export class MemoryDeliveryQueue implements DeliveryQueue {
  readonly rows = new Map<string, Row>()
  readonly endpoints = new Map<string, Endpoint>()
  readonly attempts: AttemptRecord[] = []
  readonly claims: ClaimRequest[] = []
  private sequence = 0

  addEndpoint(id: string, url: string, secrets: string[], failingSinceMs: number | null = null): void {
    this.endpoints.set(id, { url, secrets, failingSinceMs, disabled: null })
  }

  /** Like committing an event in the outbox: one row per endpoint, due now. */
  enqueue(
    endpointId: string,
    eventId: string,
    body: string = JSON.stringify({ id: eventId, type: 'delivery.created' }),
    dueAtMs = Date.now(),
  ): string {
    const id = `dv_${++this.sequence}`
    this.rows.set(id, { id, endpointId, eventId, body, attempt: 1, nextAttemptAtMs: dueAtMs, leasedUntilMs: 0, state: 'pending' })
    return id
  }

  async claimDue({ nowMs, limit, perEndpointLimit, excludeEndpointIds, leaseUntilMs }: ClaimRequest): Promise<PendingDelivery[]> {
    this.claims.push({ nowMs, limit, perEndpointLimit, excludeEndpointIds: [...excludeEndpointIds], leaseUntilMs })
    const excluded = new Set(excludeEndpointIds)
    const perEndpoint = new Map<string, number>()
    const due = [...this.rows.values()]
      .filter(
        (row) => row.state === 'pending' && row.nextAttemptAtMs !== null && row.nextAttemptAtMs <= nowMs && row.leasedUntilMs <= nowMs,
      )
      .filter((row) => !excluded.has(row.endpointId) && !this.endpoints.get(row.endpointId)?.disabled)
      .sort((a, b) => a.nextAttemptAtMs! - b.nextAttemptAtMs!)
    const claimed: PendingDelivery[] = []
    for (const row of due) {
      if (claimed.length >= limit) break
      const taken = perEndpoint.get(row.endpointId) ?? 0
      if (taken >= perEndpointLimit) continue
      perEndpoint.set(row.endpointId, taken + 1)
      row.leasedUntilMs = leaseUntilMs
      const endpoint = this.endpoints.get(row.endpointId)!
      claimed.push({
        id: row.id,
        endpointId: row.endpointId,
        url: endpoint.url,
        secrets: endpoint.secrets,
        eventId: row.eventId,
        body: row.body,
        attempt: row.attempt,
        endpointFailingSinceMs: endpoint.failingSinceMs,
      })
    }
    return claimed
  }

  async recordAttempt(record: AttemptRecord): Promise<void> {
    this.attempts.push(record)
    const row = this.rows.get(record.deliveryId)!
    const endpoint = this.endpoints.get(record.endpointId)!
    row.leasedUntilMs = 0
    row.attempt = record.attempt + 1
    row.nextAttemptAtMs = record.nextAttemptAtMs
    row.state = record.success ? 'delivered' : record.nextAttemptAtMs === null ? 'failed' : 'pending'
    endpoint.failingSinceMs = record.success ? null : (endpoint.failingSinceMs ?? record.attemptedAtMs)
    if (record.disable) endpoint.disabled = record.disable
  }

  attemptsFor(deliveryId: string): AttemptRecord[] {
    return this.attempts.filter((a) => a.deliveryId === deliveryId)
  }
}
