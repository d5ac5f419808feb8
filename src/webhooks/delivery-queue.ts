import type { DisableReason } from './retry-policy.js'

/**
 * The port between the dispatcher and storage (SQLite | PostgreSQL outbox). One row per
 * (event, endpoint): a "delivery". The dispatcher never sees SQL; storage never sees HTTP.
 */
export interface DeliveryQueue {
  /**
   * Rows whose next attempt is due at `nowMs`, oldest due first, on enabled endpoints, and
   * leased until `leaseUntilMs`: a leased row is not returned again until the lease expires,
   * so a crash mid-attempt makes it due again (at-least-once). Must honour `limit` overall,
   * `perEndpointLimit` per endpoint (e.g. `ROW_NUMBER() OVER (PARTITION BY endpoint_id)`),
   * and skip `excludeEndpointIds` (endpoints this dispatcher is already saturating).
   */
  claimDue(request: ClaimRequest): Promise<PendingDelivery[]>
  /**
   * Stores the attempt (`GET /v1/webhooks/{id}/attempts`) and, in one transaction: sets the
   * row's next attempt time and releases its lease, or marks it delivered (`success`) or
   * failed for good (`nextAttemptAtMs === null`); on success clears the endpoint's
   * failing-since, on failure sets it if unset; disables the endpoint when `disable` is set.
   */
  recordAttempt(record: AttemptRecord): Promise<void>
}

export interface ClaimRequest {
  nowMs: number
  limit: number
  perEndpointLimit: number
  excludeEndpointIds: readonly string[]
  leaseUntilMs: number
}

export interface PendingDelivery {
  /** The delivery row (event × endpoint). */
  id: string
  endpointId: string
  url: string
  /** Current secret first; the previous one too while a rotation's 24 h overlap lasts. */
  secrets: string[]
  /** `evt_…`, sent as `webhook-id`: the same on every attempt so receivers can de-duplicate. */
  eventId: string
  /** The serialised envelope, signed and sent byte for byte. */
  body: string
  /** `v1a`: signed with the service's Ed25519 keys instead of the secrets (absent: `v1`). */
  signatureScheme?: 'v1' | 'v1a'
  /** The body's media type when not `application/json` (a FHIR writeback: `application/fhir+json`). */
  contentType?: string
  /** 1-based number of the attempt about to be made. */
  attempt: number
  /** Earliest failed attempt to this endpoint since its last success (any event), or null. */
  endpointFailingSinceMs: number | null
}

/** One attempt, shaped like the attempt resource (`GET /v1/webhooks/{id}/attempts`) plus what storage must do next. */
export interface AttemptRecord {
  deliveryId: string
  endpointId: string
  eventId: string
  attempt: number
  attemptedAtMs: number
  statusCode: number | null
  error: string | null
  durationMs: number
  success: boolean
  /** When to try again; null when delivered, out of retries, or the endpoint is disabled. */
  nextAttemptAtMs: number | null
  disable: DisableReason | null
}
