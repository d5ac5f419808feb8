import { accessToken, signIn } from './auth'

/** An API error as problem+json (RFC 9457) says it. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message)
  }
}

export async function api<T>(path: string, init: { method?: string; body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${await accessToken()}`, accept: 'application/json' }
  if (init.body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(path, {
    method: init.method ?? 'GET',
    headers,
    body: init.body === undefined ? null : JSON.stringify(init.body),
    signal: init.signal ?? null,
  })
  if (res.status === 401) return signIn()
  const body = (await res.json().catch(() => null)) as Record<string, unknown> | null
  if (!res.ok) throw new ApiError(res.status, String(body?.code ?? 'error'), String(body?.detail ?? body?.title ?? res.statusText))
  return body as T
}

export type Page<T> = { data: T[]; next_cursor: string | null }

export type Excursion = {
  started_at: string
  ended_at: string | null
  duration_s: number
  peak_c: number | null
  kind: 'high' | 'low' | 'unknown'
}
export type Profile = {
  name: string
  min_c: number
  max_c: number
  hard_min_c: number | null
  hard_max_c: number | null
  max_gap_s: number | null
  grace_s: number
  max_excursion_s: number
  max_cumulative_s: number
  mkt_max_c: number | null
}
export type CustodyEvent = {
  seq: number
  type: string
  actor: { client_id: string; sub: string }
  from: string | null
  to: string | null
  location: { lat: number; lng: number } | null
  evidence_hash: string | null
  occurred_at: string
  recorded_at: string
  prev_hash: string
  hash: string
}
export type Disposition = {
  decision: 'release' | 'return'
  note: string | null
  decided_by: { client_id: string; sub: string }
  decided_at: string
}
export type Delivery = {
  id: string
  rx_id: string
  pharmacy_id: string
  status: string
  eta: string
  fleet_id: string | null
  driver_id: string | null
  tote_id: string | null
  cold_chain: {
    required: boolean
    profile: Profile | null
    state: 'OK' | 'EXCURSION' | 'BROKEN' | 'UNMONITORED'
    min_c: number | null
    max_c: number | null
    mkt_c: number | null
    time_out_of_range_s: number
    unknown_s: number
    excursions: Excursion[]
    break_reason: string | null
    broken_at: string | null
    disposition: Disposition | null
  }
  custody: CustodyEvent[]
  created_at: string
  updated_at: string
}
export type Prescription = {
  rx_id: string
  pharmacy_id: string
  patient_id: string
  cold_chain: boolean
  temperature_profile: unknown
  created_at: string
  audit_hash: string
  items?: { description: string; ndc?: string; quantity?: number }[]
  deliver_by?: string | null
  external_ref?: string | null
  delivery_id: string
}
export type Pharmacy = { id: string; name: string; timezone: string }
export type TracePoint = { t: string; min: number; max: number; avg: number; n: number }
export type Trace = {
  delivery_id: string
  profile: Profile | null
  from: string
  to: string
  step_s: number
  points: TracePoint[]
  excursions: Excursion[]
  summary: {
    min_c: number | null
    max_c: number | null
    mkt_c: number | null
    time_out_of_range_s: number
    unknown_s?: number
    as_of?: string
    scope: string
  }
}
export type Party = { id: string; kind: 'user' | 'driver' | 'pharmacy'; name: string }
export type EventEnvelope = { id: string; type: string; created_at: string; delivery_id?: string | null; data: Record<string, unknown> }
