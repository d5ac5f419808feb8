import type { SensorRecord } from '../../src/domain/sensor-calibration'
import type { CustodyEvent, Delivery, TemperatureTrace, TraceExcursion } from '../../src/domain/shapes'
import { accessToken, signIn } from './auth'

// The service's own definitions (types only: nothing of the service reaches the bundle).
export type { CustodyEvent, Delivery }
export type Excursion = TraceExcursion
export type Trace = TemperatureTrace

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
  const body = (await res.json().catch(() => null)) as Record<string, unknown> | null
  // A token the service no longer accepts signs in again; a refused signature (wrong password, step-up) is the form's to show.
  if (res.status === 401 && (body?.code ?? 'unauthorized') === 'unauthorized') return signIn()
  if (!res.ok) throw new ApiError(res.status, String(body?.code ?? 'error'), String(body?.detail ?? body?.title ?? res.statusText))
  return body as T
}

export type Page<T> = { data: T[]; next_cursor: string | null }

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
  /** Free-form; `lat`/`lng` when the pharmacy gave the door's coordinates. */
  delivery_address?: Record<string, unknown> | null
}
/** A driver's position on a delivery (`GET /v1/deliveries/{id}/locations`). */
export type Position = { lat: number; lng: number; accuracy_m: number; at: string; driver_id: string }
export type Pharmacy = { id: string; name: string; timezone: string }
export type ToteSensor = SensorRecord
export type Tote = { id: string; serial: string; sensor: ToteSensor | null }
export type Alarm = {
  id: string
  delivery_id: string
  kind: string
  state: string
  raised_at: string
  cleared_at: string | null
  acknowledged_by: string | null
  acknowledged_at: string | null
  note: string | null
  assigned_to: string | null
  escalated_at: string | null
}
export type Party = { id: string; kind: 'user' | 'driver' | 'pharmacy'; name: string }
export type EventEnvelope = { id: string; type: string; created_at: string; delivery_id?: string | null; data: Record<string, unknown> }
