import type { TokenSource } from './tokens.js'

export interface EmbedSession {
  /** Signed, read-only and limited to the fleet; put it in an iframe on one of the fleet's `embed_origins`. */
  url: string
  expires_at: string
}

/**
 * A short-lived signed URL of the fleet's branded dashboard (`POST /v1/fleets/{id}/embed-sessions`,
 * `ttl_s` ≤ 600). Create it on your server, per page view; the browser only sees the URL.
 */
export async function createEmbedUrl(options: { baseUrl: string; tokens: TokenSource; fetch?: typeof fetch | undefined }, fleetId: string, ttlS = 300): Promise<EmbedSession> {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis)
  const token = await options.tokens.token()
  const res = await doFetch(new URL(`/v1/fleets/${encodeURIComponent(fleetId)}/embed-sessions`, options.baseUrl), {
    method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify({ ttl_s: ttlS }),
  })
  if (res.status === 401) options.tokens.invalidate(token)
  const body = await res.json().catch(() => null) as EmbedSession & { code?: string; detail?: string } | null
  if (res.status !== 201 || !body?.url) throw new Error(`embed session refused: ${res.status} ${body?.code ?? ''}`.trim())
  return { url: body.url, expires_at: body.expires_at }
}
