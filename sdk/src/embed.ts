import type { Client } from 'openapi-fetch'
import { ApiError } from './pages.js'
import type { components, paths } from './schema.js'

/** `POST /v1/fleets/{id}/embed-sessions`: a URL signed, read-only and limited to the fleet, and when it stops working. */
export type EmbedSession = components['schemas']['EmbedSession']

/**
 * A short-lived signed URL of the fleet's branded dashboard (`POST /v1/fleets/{id}/embed-sessions`,
 * `ttl_s` 1–600). Create it on your server, per page view; the browser only sees the URL. A refusal
 * throws `ApiError` with the problem (404: no such fleet, or not this token's).
 */
export async function createEmbedUrl(api: Client<paths>, fleetId: string, ttlS = 300): Promise<EmbedSession> {
  const { data, error, response } = await api.POST('/v1/fleets/{id}/embed-sessions', {
    params: { path: { id: fleetId } },
    body: { ttl_s: ttlS },
  })
  if (!data) throw new ApiError(response.status, error)
  return data
}
