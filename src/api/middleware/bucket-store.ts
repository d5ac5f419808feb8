import type { Clock } from '../../clock.js'
import { TokenBuckets } from './token-buckets.js'

/** One kind of token bucket: its name (the keys' namespace), refill rate and size. */
export type Limit = { name: string; rps: number; burst: number }

/** One bucket asked for a token: the limit, and whose bucket (a client id, a tenant, an address). */
export type Want = { limit: Limit; key: string }

/**
 * What a bucket answered: spent (with what is left and when it is full again), or not, with how
 * long until it has a token (0: it had one, but another bucket of the request was empty).
 */
export type Spent = { ok: true; remaining: number; resetS: number } | { ok: false; remaining: number; retryAfterS: number }

/**
 * Where the token buckets of the rate limits and throttles are kept: this process's memory (one
 * process on SQLite), or the database every copy of the service shares (PostgreSQL; see
 * shared-buckets.ts), so that N copies allow the documented rate, not N times it.
 */
export type BucketStore = {
  /** Spends one token from each bucket if every one has one; otherwise none. One answer per want, in order. */
  spend(wants: readonly Want[]): Promise<Spent[]>
}

/** The buckets in this process's memory: O(1) map operations, no I/O. */
export class MemoryBuckets implements BucketStore {
  private readonly byLimit = new Map<string, TokenBuckets>()

  constructor(private readonly clock: Clock) {}

  async spend(wants: readonly Want[]): Promise<Spent[]> {
    const buckets = wants.map((w) => this.bucketsOf(w.limit))
    const waits = wants.map((w, i) => buckets[i]!.waitS(w.key))
    if (waits.some((s) => s > 0))
      return wants.map((w, i) => ({ ok: false, remaining: waits[i] ? 0 : Math.floor(buckets[i]!.peek(w.key)), retryAfterS: waits[i]! }))
    return wants.map((w, i) => {
      const taken = buckets[i]!.take(w.key)
      return taken.ok ? taken : { ok: false, remaining: 0, retryAfterS: taken.retryAfterS }
    })
  }

  private bucketsOf(limit: Limit): TokenBuckets {
    let buckets = this.byLimit.get(limit.name)
    if (!buckets) this.byLimit.set(limit.name, (buckets = new TokenBuckets(limit.rps, limit.burst, this.clock)))
    return buckets
  }
}
