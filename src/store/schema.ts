import type { Generated, Kysely, Transaction } from 'kysely'
import type { StabilityTables } from './stability-tables.js'
import type { AlarmTables } from './alarm-tables.js'

/**
 * The entity store's tables. Times are RFC 3339 UTC strings (they sort as text and come back
 * exactly as the API shows them, which the custody hashes depend on); JSON is stored as text;
 * booleans as 0/1, so SQLite and PostgreSQL share every query.
 */
export interface Database extends StabilityTables, AlarmTables {
  signing_keys: {
    kid: string
    private_jwk: string
    public_jwk: string
    created_at: string
    activates_at: string
    retires_at: string | null
  }
  /** The service's Ed25519 webhook keys (`v1a` signatures, migration 0047); `private_jwk` sealed. */
  webhook_signing_keys: {
    kid: string
    private_jwk: string
    public_jwk: string
    created_at: string
    activates_at: string
    retires_at: string | null
  }
  oauth_clients: {
    client_id: string
    client_name: string
    secret_hash: string
    previous_secret_hash: string | null
    previous_secret_expires_at: string | null
    grant_types: string
    redirect_uris: string
    scope: string
    token_endpoint_auth_method: string
    pharmacy_id: string | null
    fleet_id: string | null
    created_at: string
    first_party: Generated<number>
  }
  revoked_tokens: { jti: string; expires_at: string }
  pharmacies: {
    id: string
    name: string
    ncpdp_id: string | null
    npi: string | null
    address: string
    timezone: string
    location: string | null
    writeback: string | null
    created_at: string
    /** `manual` | `auto_within_budget` (migration 0032; rows from before it are manual). */
    release_policy: Generated<string>
    /** `refuse` | `warn` | `strict` (migration 0041): a dispatch with a tote past its calibration. */
    calibration_policy: Generated<string>
    /** Seconds an alarm may stay unacknowledged before `alarm.escalated` (migration 0041). */
    escalate_after_s: Generated<number>
    /** GS1 GLN, 13 digits (migration 0045); null when the pharmacy has none. */
    gln: string | null
    /** Attempts a delivery may make, the first included (migration 0053; 3 unless set). */
    max_attempts: Generated<number>
    /** Proofs every delivery of the pharmacy needs, as JSON (migration 0050); null for none. */
    pod_requirements?: string | null
    /** E.164 (migration 0058); the patients' tracking page shows it. Null when none was given. */
    phone: string | null
    /** 1 when the pharmacy takes `patient.notify` events (migration 0058). */
    patient_notify: Generated<number>
  }
  prescriptions: {
    id: string
    pharmacy_id: string
    patient_id: string
    cold_chain: number
    temperature_profile: string | null
    deliver_by: string | null
    delivery_address: string | null
    items: string
    external_ref: string | null
    metadata: string
    eta: string
    audit_hash: string
    delivery_id: string
    client_id: string
    created_at: string
    /** Proofs this prescription adds to its pharmacy's, as JSON (migration 0050); null for none. */
    pod_requirements?: string | null
  }
  deliveries: {
    id: string
    rx_id: string
    pharmacy_id: string
    status: string
    eta: string
    fleet_id: string | null
    driver_id: string | null
    tote_id: string | null
    cold_chain_required: number
    profile: string | null
    cold_chain: string | null
    disposition: string | null
    bound_from: string | null
    bound_to: string | null
    /** The version whose binding change the stored readings have not followed yet (migration 0067). */
    follow_pending?: number | null
    version: number
    event_seq: number
    created_at: string
    updated_at: string
    /** Pricing (migration 0008): the rate card version at dispatch; the end's record time and price inputs. */
    rate_card_version: number | null
    ended_at: string | null
    distance_m: number | null
    after_hours: number | null
    on_time: number | null
    /** An automatic release by stability budget, as JSON (migration 0032); null otherwise. */
    release: string | null
    /** 1, or n + 1 for the n-th redelivery of the same prescription (migration 0033). */
    leg: number
    /** What the dispatch warned of, as a JSON array (migration 0041: a tote past calibration under `warn`); null if nothing. */
    warnings: string | null
    /** The live ETA from drivers' positions or the fleet's router (migration 0055); null before any. `eta` keeps the promise. */
    live_eta: string | null
    /** The proofs its delivery needs, fixed by its dispatch, as JSON (migration 0050); null for none. */
    pod_requirements?: string | null
  }
  custody_events: {
    delivery_id: string
    seq: number
    type: string
    actor: string
    from_party: string | null
    to_party: string | null
    location: string | null
    evidence_hash: string | null
    occurred_at: string
    recorded_at: string
    prev_hash: string
    hash: string
    /** JSON of the e-signature a `signed` event carries (migration 0036); null on every other event. */
    signature: string | null
    /** JSON `{last_c, at, state}` on events of cold-chain deliveries recorded since migration 0053; else null. */
    temperature: string | null
    /** JSON of the attempt a `failed` or `reattempted` event records (migration 0053); null on every other event. */
    attempt: string | null
    /** JSON of what a proof of delivery adds to its `delivered` event (migration 0050); null on every other event. */
    evidence?: string | null
  }
  /** Stored images, one row per content (migration 0050): `chunks` rows of `attachment_chunks` hold its bytes. */
  attachment_blobs: { sha256: string; content_type: string; size: number; chunks: number; created_at: string }
  attachment_chunks: { sha256: string; seq: number; bytes: Buffer }
  /** An image uploaded for a delivery (migration 0050); `actor` is JSON `{client_id, sub}`. */
  attachments: { id: string; delivery_id: string; sha256: string; content_type: string; size: number; actor: string; created_at: string }
  /** The PIN a delivery's patient tells the driver (migration 0050), sealed; its wrong tries. */
  delivery_pins: { delivery_id: string; pin: string; wrong_tries: Generated<number>; locked_at: string | null; issued_at: string }
  /** The custody events that are EPCIS events, in the order recorded, with their tenant (migration 0046). */
  epcis_events: {
    pos: Generated<number>
    delivery_id: string
    seq: number
    pharmacy_id: string
    fleet_id: string | null
    recorded_at: string
  }
  events: {
    pos: Generated<number>
    id: string
    type: string
    created_at: string
    pharmacy_id: string | null
    fleet_id: string | null
    delivery_id: string | null
    rx_id: string | null
    seq: number | null
    data: string
    dedupe_key: string | null
  }
  audit_events: {
    pos: Generated<number>
    at: string
    jti: string | null
    client_id: string | null
    sub: string | null
    method: string
    path: string
    status: number
    request_id: string
    /**
     * The tenant of the token that made the request, by which restricted tokens read the log;
     * null for unrestricted tokens and records written before 0015.
     */
    pharmacy_id: string | null
    fleet_id: string | null
    /** The operationId the request ran; null for unmatched paths and records written before 0039. */
    action: string | null
    /** The delivery the request concerned (its path's, or the one its answer names). */
    delivery_id: string | null
    /** JSON of the e-signature this record is (a product stability version's, migration 0035); null on request records. */
    signature: string | null
    prev_hash: string
    hash: string
  }
  idempotency_keys: {
    client_id: string
    key: string
    request_hash: string
    state: string
    status: number | null
    body: string | null
    headers: string | null
    created_at: string
    expires_at: string
  }
  fleets: {
    id: string
    name: string
    branding: string
    created_at: string
    embed_origins: Generated<string>
    timezone: Generated<string>
    /** km/h over which a straight-line distance becomes an ETA (migration 0055; default 25). */
    average_speed_kmh: Generated<number>
  }
  /** Drivers' positions, per delivery in progress (migration 0055; docs/fleet.md, Live location and ETA). */
  driver_positions: {
    id: Generated<number>
    delivery_id: string
    driver_id: string
    lat: number
    lng: number
    accuracy_m: number
    at: string
    recorded_at: string
  }
  /** Each delivery's ETA state (migration 0055): the newest position used, the router's ETA, what was announced. */
  delivery_etas: {
    delivery_id: string
    position_at: string | null
    distance_m: number | null
    router_eta: string | null
    router_until: string | null
    announced_eta: string
    announced_at: string | null
    arriving_at: string | null
  }
  rate_cards: {
    fleet_id: string
    version: number
    currency: string
    base_fee_cents: number
    per_km_cents: number
    cold_chain_surcharge_cents: number
    failed_attempt_fee_cents: number
    after_hours_multiplier_e4: number
    commission_bps: number
    effective_from: string
    created_at: string
    created_by: string
  }
  drivers: { id: string; fleet_id: string; name: string; phone: string | null; created_at: string }
  webhook_endpoints: {
    id: string
    kind: 'webhook' | 'writeback'
    url: string
    events: string
    description: string | null
    enabled: number
    disabled_reason: string | null
    pharmacy_id: string | null
    fleet_id: string | null
    secret: string
    previous_secret: string | null
    previous_secret_expires_at: number | null
    failing_since: number | null
    created_at: string
    updated_at: string
    /** `v1` (HMAC, default) | `v1a` (Ed25519), migration 0047. */
    signature_scheme: 'v1' | 'v1a'
    /** `rxtrace` (the event envelope, default) | `fhir-r4` (a writeback as a FHIR Bundle), migration 0047. */
    body_format: 'rxtrace' | 'fhir-r4'
  }
  webhook_messages: {
    id: string
    event_id: string
    endpoint_id: string
    state: 'pending' | 'delivered' | 'failed'
    attempts: number
    next_attempt_at: number | null
    lease_until: number | null
    created_at: number
  }
  webhook_attempts: {
    id: string
    message_id: string
    endpoint_id: string
    event_id: string
    attempt: number
    at: string
    status_code: number | null
    error: string | null
    duration_ms: number
    success: number
  }
  users: {
    id: string
    email: string
    name: string
    role: string
    pharmacy_id: string | null
    fleet_id: string | null
    driver_id: string | null
    password_hash: string | null
    disabled: number
    created_at: string
    updated_at: string
  }
  user_setup_tokens: { token_hash: string; user_id: string; expires_at: string; used_at: string | null }
  user_sessions: { id_hash: string; user_id: string; created_at: string; last_seen_at: string; ended_at: string | null }
  authorization_codes: {
    code_hash: string
    client_id: string
    user_id: string
    session_hash: string
    redirect_uri: string
    code_challenge: string
    scope: string
    expires_at: string
    used_at: string | null
    family_id: string | null
    access_jti: string | null
    access_expires_at: string | null
  }
  refresh_tokens: {
    token_hash: string
    family_id: string
    client_id: string
    user_id: string
    session_hash: string
    scope: string
    family_created_at: string
    created_at: string
    expires_at: string
    access_jti: string
    access_expires_at: string
    rotated_at: string | null
    revoked_at: string | null
  }
  user_consents: { user_id: string; client_id: string; scope: string; granted_at: string }
  totes: {
    id: string
    serial: string
    pharmacy_id: string | null
    fleet_id: string | null
    mqtt_password_hash: string
    created_at: string
    /** The tote's sensor and its calibration, as JSON (migration 0041); null until recorded. */
    sensor: string | null
  }
  /** Tote accounts an external MQTT broker has yet to get (src/mqtt/broker-accounts.ts). */
  broker_accounts: {
    tote_id: string
    sealed_password: string
    attempts: Generated<number>
    next_attempt_at: number
    last_error: string | null
    created_at: string
  }
  /** PostgreSQL only (migration 0018): token buckets every copy spends from (src/api/middleware/shared-buckets.ts). */
  rate_limit_buckets: { key: string; rps: number; burst: number; tokens: number; granted: number; updated_ms: number }
  /** PostgreSQL only (migration 0018): failed sign-ins of the last 15 minutes (src/auth/shared-sign-in-throttle.ts). */
  sign_in_failures: { key: string; at_ms: number }
}

export type Db = Kysely<Database>
/** Either the database or an open transaction: queries accept both. */
export type Executor = Kysely<Database> | Transaction<Database>

export const toJson = (value: unknown): string => JSON.stringify(value)
export const fromJson = <T>(text: string | null): T => (text === null ? null : JSON.parse(text)) as T
