import type { MiddlewareHandler } from 'hono'
import type { Clock } from '../../clock.js'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'

type Bucket = { tokens: number; updatedMs: number }

/**
 * A token bucket per client (SPEC §2), with the IETF RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers): the policy is the burst `q` refilled over `w` seconds.
 * Buckets live in memory: with N instances a client gets N times the rate, the usual trade-off.
 */
export function rateLimit({ rps, burst, clock }: { rps: number; burst: number; clock: Clock }): MiddlewareHandler<AppEnv> {
  const buckets = new Map<string, Bucket>()
  const windowS = Math.max(1, Math.ceil(burst / rps))
  const policy = `"per-client";q=${burst};w=${windowS}`
  return async function rateLimitMiddleware(c, next) {
    const now = clock.now()
    const key = c.get('principal').clientId
    const bucket = buckets.get(key) ?? { tokens: burst, updatedMs: now }
    // max(0, …): a clock that steps back (NTP) must not drain the bucket.
    bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.updatedMs) / 1_000) * rps)
    bucket.updatedMs = now
    buckets.set(key, bucket)
    c.header('RateLimit-Policy', policy)
    if (bucket.tokens < 1) {
      const retryAfterS = Math.max(1, Math.ceil((1 - bucket.tokens) / rps))
      c.header('RateLimit', `"per-client";r=0;t=${retryAfterS}`)
      throw new AppError('rate_limited', `Too many requests: this client may send ${rps} per second (bursts of ${burst}).`, {}, { 'Retry-After': String(retryAfterS) })
    }
    bucket.tokens -= 1
    const remaining = Math.floor(bucket.tokens)
    c.header('RateLimit', `"per-client";r=${remaining};t=${Math.ceil((burst - bucket.tokens) / rps)}`)
    await next()
  }
}
