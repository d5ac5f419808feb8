import type { Context, MiddlewareHandler } from 'hono'
import type { AppEnv } from '../env.js'
import { callerAddress } from './caller-address.js'
import type { BucketStore, Limit } from './bucket-store.js'

export type OAuthThrottleOptions = {
  /** Every `/oauth/*` request spends one of its caller address's tokens. */
  perAddress: { rps: number; burst: number }
  /** Every token request spends one of the named client's tokens, whoever sends it. */
  perClient: { rps: number; burst: number }
  /** Where the buckets are counted: memory (one process) or the database all copies share. */
  buckets: BucketStore
  trustProxy: boolean
}

/**
 * Throttles the OAuth endpoints, which anyone may call without a token (docs/security.md, Resource limits): per caller
 * address, and for `/oauth/token` per client id as well (a request the client's bucket refuses
 * has still spent its address's token). A refusal is 429 with Retry-After in the endpoints' own error format
 * (RFC 6749 §5.2 JSON; `rate_limited` is our extension code).
 */
export function oauthThrottle({ perAddress, perClient, buckets, trustProxy }: OAuthThrottleOptions): MiddlewareHandler<AppEnv> {
  const address: Limit = { name: 'oauth-address', ...perAddress }
  const client: Limit = { name: 'oauth-client', ...perClient }
  return async function oauthThrottleMiddleware(c, next) {
    const [byAddress] = await buckets.spend([{ limit: address, key: callerAddress(c, trustProxy) }])
    if (!byAddress!.ok) return tooMany(c, byAddress!.retryAfterS, 'Too many requests from this address.')
    if (c.req.method === 'POST' && c.req.path === '/oauth/token') {
      const clientId = await namedClientId(c)
      if (clientId !== null) {
        const [byClient] = await buckets.spend([{ limit: client, key: clientId }])
        if (!byClient!.ok) return tooMany(c, byClient!.retryAfterS, 'Too many token requests for this client.')
      }
    }
    await next()
  }
}

function tooMany(c: Context, retryAfterS: number, description: string): Response {
  c.header('Retry-After', String(retryAfterS))
  c.header('Cache-Control', 'no-store')
  return c.json({ error: 'rate_limited', error_description: description }, 429)
}

/** The client id a token request names: RFC 6749 §2.3.1 Basic credentials, or the form's client_id. */
async function namedClientId(c: Context): Promise<string | null> {
  const header = c.req.header('authorization')
  if (header?.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString()
    const colon = decoded.indexOf(':')
    return colon < 0 ? decoded : formDecoded(decoded.slice(0, colon))
  }
  // Hono caches the body, so the route's own form validation reads it again for free.
  const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase()
  if (type !== 'application/x-www-form-urlencoded') return null
  return new URLSearchParams(await c.req.text()).get('client_id')
}

function formDecoded(text: string): string {
  try {
    return decodeURIComponent(text)
  } catch {
    return text
  }
}
