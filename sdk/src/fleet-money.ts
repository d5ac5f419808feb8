import type { Client } from 'openapi-fetch'
import { ApiError } from './pages.js'
import type { components, paths } from './schema.js'

export type RateCard = components['schemas']['RateCard']
export type Reconciliation = components['schemas']['Reconciliation']
export type ReconciliationLine = components['schemas']['ReconciliationLine']
export type StatementComparison = components['schemas']['StatementComparison']
/** A period `[from, to)`, RFC 3339: the lines whose delivery's end was recorded in it. */
export type Period = paths['/v1/fleets/{id}/reconciliation']['get']['parameters']['query']
/** One line of an operator's statement; other members are ignored by the service. */
export type StatementLine = { delivery_id: string; payout_cents: number }

/** `GET /v1/fleets/{id}/rate-card`: the version in force now (`ApiError` 404 before the first). */
export async function getRateCard(api: Client<paths>, fleetId: string): Promise<RateCard> {
  const { data, error, response } = await api.GET('/v1/fleets/{id}/rate-card', { params: { path: { id: fleetId } } })
  if (!data) throw new ApiError(response.status, error)
  return data
}

/** `GET /v1/fleets/{id}/reconciliation` as JSON: every line of the period and the totals. */
export async function getReconciliation(api: Client<paths>, fleetId: string, period: Period): Promise<Reconciliation> {
  const { data, error, response } = await api.GET('/v1/fleets/{id}/reconciliation', {
    params: { path: { id: fleetId }, query: period },
    headers: { accept: 'application/json' },
  })
  if (!data) throw new ApiError(response.status, error)
  // The 200 is JSON or CSV by Accept; JSON was asked for.
  return data as Reconciliation
}

/** The same period as RFC 4180 CSV text with its header row (`Accept: text/csv`). */
export async function getReconciliationCsv(api: Client<paths>, fleetId: string, period: Period): Promise<string> {
  const { data, error, response } = await api.GET('/v1/fleets/{id}/reconciliation', {
    params: { path: { id: fleetId }, query: period },
    headers: { accept: 'text/csv' },
    parseAs: 'text',
  })
  if (data === undefined) throw new ApiError(response.status, error)
  return data
}

/**
 * `POST /v1/fleets/{id}/reconciliation`: compares the operator's statement with the period's lines
 * on `payout_cents`. Lines (any iterable, sent as JSON lines) or CSV text with a header row naming
 * `delivery_id` and `payout_cents`. A malformed line throws `ApiError` 422 naming every bad line.
 */
export async function checkStatement(
  api: Client<paths>,
  fleetId: string,
  period: Period,
  statement: Iterable<StatementLine> | string,
): Promise<StatementComparison> {
  const csv = typeof statement === 'string'
  const text = csv ? statement : [...statement].map((line) => `${JSON.stringify(line)}\n`).join('')
  const { data, error, response } = await api.POST('/v1/fleets/{id}/reconciliation', {
    params: { path: { id: fleetId }, query: period },
    body: text,
    headers: { 'content-type': csv ? 'text/csv' : 'application/x-ndjson' },
    bodySerializer: (body: string) => body,
  })
  if (!data) throw new ApiError(response.status, error)
  return data
}
