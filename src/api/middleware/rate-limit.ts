import type { MiddlewareHandler } from 'hono'
import type { Principal } from '../../auth/scopes.js'
import type { Clock } from '../../clock.js'
import { AppError } from '../../errors.js'
import type { AppEnv } from '../env.js'
import { TokenBuckets } from './token-buckets.js'

export type RateLimitOptions = {
  /** Each client's bucket. */
  rps: number
  burst: number
  /** The bucket every client of one pharmacy or fleet shares, so minting clients does not multiply a tenant's rate. */
  tenantRps: number
  tenantBurst: number
  clock: Clock
}

const tenantOf = (p: Principal) => (p.pharmacyId ? `ph:${p.pharmacyId}` : p.fleetId ? `fl:${p.fleetId}` : null)
const windowOf = (burst: number, rps: number) => Math.max(1, Math.ceil(burst / rps))

/**
 * A token bucket per client and one per tenant (docs/api.md, Rate limits), with the IETF RateLimit headers
 * (draft-ietf-httpapi-ratelimit-headers): each policy is its burst `q` refilled over `w` seconds.
 * A request spends a token from both, so it passes only while both have one; two map lookups
 * per request. Buckets live in memory: with N instances a client gets N times the rate, the
 * usual trade-off. Unrestricted (admin) clients have no tenant bucket.
 */
export function rateLimit({ rps, burst, tenantRps, tenantBurst, clock }: RateLimitOptions): MiddlewareHandler<AppEnv> {
  const clients = new TokenBuckets(rps, burst, clock)
  const tenants = new TokenBuckets(tenantRps, tenantBurst, clock)
  const clientPolicy = `"per-client";q=${burst};w=${windowOf(burst, rps)}`
  const tenantPolicy = `"per-tenant";q=${tenantBurst};w=${windowOf(tenantBurst, tenantRps)}`
  return async function rateLimitMiddleware(c, next) {
    const principal = c.get('principal')
    const tenant = tenantOf(principal)
    c.header('RateLimit-Policy', tenant ? `${clientPolicy}, ${tenantPolicy}` : clientPolicy)
    const clientWait = clients.waitS(principal.clientId)
    const tenantWait = tenant ? tenants.waitS(tenant) : 0
    if (clientWait > 0 || tenantWait > 0) {
      const retryAfterS = Math.max(clientWait, tenantWait)
      const state = [`"per-client";r=${clientWait ? 0 : Math.floor(clients.peek(principal.clientId))};t=${clientWait}`]
      if (tenant) state.push(`"per-tenant";r=${tenantWait ? 0 : Math.floor(tenants.peek(tenant))};t=${tenantWait}`)
      c.header('RateLimit', state.join(', '))
      const detail =
        tenantWait > 0
          ? `Too many requests: the clients of this tenant together may send ${tenantRps} per second (bursts of ${tenantBurst}).`
          : `Too many requests: this client may send ${rps} per second (bursts of ${burst}).`
      throw new AppError('rate_limited', detail, {}, { 'Retry-After': String(retryAfterS) })
    }
    const spent = [clients.take(principal.clientId), ...(tenant ? [tenants.take(tenant)] : [])]
    c.header(
      'RateLimit',
      spent.map((s, i) => `"per-${i ? 'tenant' : 'client'}";r=${s.ok ? s.remaining : 0};t=${s.ok ? s.resetS : 0}`).join(', '),
    )
    await next()
  }
}
