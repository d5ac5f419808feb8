import type { MiddlewareHandler } from 'hono'
import type { Principal } from '../../auth/scopes.js'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'
import type { BucketStore, Limit } from './bucket-store.js'

export type RateLimitOptions = {
  /** Each client's bucket. */
  rps: number
  burst: number
  /** The bucket every client of one pharmacy or fleet shares, so minting clients does not multiply a tenant's rate. */
  tenantRps: number
  tenantBurst: number
  /** Where the buckets are counted: memory (one process) or the database all copies share. */
  buckets: BucketStore
}

const tenantOf = (p: Principal) => (p.pharmacyId ? `ph:${p.pharmacyId}` : p.fleetId ? `fl:${p.fleetId}` : null)
const windowOf = (burst: number, rps: number) => Math.max(1, Math.ceil(burst / rps))

/**
 * A token bucket per client and one per tenant (docs/api.md, Rate limits), with the IETF RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers): each policy is its burst `q` refilled over `w` seconds.
 * A request spends a token from both, so it passes only while both have one. In memory that is
 * two map lookups; on PostgreSQL one statement, and the rate holds across every copy.
 * Unrestricted (admin) clients have no tenant bucket.
 */
export function rateLimit({ rps, burst, tenantRps, tenantBurst, buckets }: RateLimitOptions): MiddlewareHandler<AppEnv> {
  const perClient: Limit = { name: 'api-client', rps, burst }
  const perTenant: Limit = { name: 'api-tenant', rps: tenantRps, burst: tenantBurst }
  const clientPolicy = `"per-client";q=${burst};w=${windowOf(burst, rps)}`
  const tenantPolicy = `"per-tenant";q=${tenantBurst};w=${windowOf(tenantBurst, tenantRps)}`
  return async function rateLimitMiddleware(c, next) {
    const principal = c.get('principal')
    const tenant = tenantOf(principal)
    c.header('RateLimit-Policy', tenant ? `${clientPolicy}, ${tenantPolicy}` : clientPolicy)
    const spent = await buckets.spend([
      { limit: perClient, key: principal.clientId },
      ...(tenant ? [{ limit: perTenant, key: tenant }] : []),
    ])
    const name = (i: number) => `"per-${i ? 'tenant' : 'client'}"`
    if (spent.some((s) => !s.ok)) {
      const waits = spent.map((s) => (s.ok ? 0 : s.retryAfterS))
      c.header('RateLimit', spent.map((s, i) => `${name(i)};r=${waits[i] ? 0 : s.remaining};t=${waits[i]}`).join(', '))
      const detail =
        (waits[1] ?? 0) > 0
          ? `Too many requests: the clients of this tenant together may send ${tenantRps} per second (bursts of ${tenantBurst}).`
          : `Too many requests: this client may send ${rps} per second (bursts of ${burst}).`
      throw new AppError('rate_limited', detail, {}, { 'Retry-After': String(Math.max(...waits)) })
    }
    c.header('RateLimit', spent.map((s, i) => `${name(i)};r=${s.remaining};t=${s.ok ? s.resetS : 0}`).join(', '))
    await next()
  }
}
