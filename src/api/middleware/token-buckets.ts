import type { Clock } from '../../clock.js'

type Bucket = { tokens: number; updatedMs: number }

export type Take = { ok: true; remaining: number; resetS: number } | { ok: false; retryAfterS: number }

// A map of idle buckets is swept once it has doubled since the last sweep: each request pays
// O(1) amortized, and keys an attacker invents (addresses, client ids) do not accumulate.
const FIRST_SWEEP_AT = 1_024

/**
 * Token buckets by key (a client, a tenant, an address): `burst` tokens, refilled at `rps`.
 * A full bucket is the same as no bucket, so idle keys are forgotten.
 */
export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>()
  private sweepAt = FIRST_SWEEP_AT

  constructor(
    readonly rps: number,
    readonly burst: number,
    private readonly clock: Clock,
  ) {}

  /** Tokens left for `key` now, without spending one. */
  peek(key: string): number {
    const bucket = this.buckets.get(key)
    return bucket ? this.refilled(bucket, this.clock.now()) : this.burst
  }

  /** Spends one token of `key`, or says how long until one is available. */
  take(key: string): Take {
    const now = this.clock.now()
    let bucket = this.buckets.get(key)
    if (!bucket) {
      if (this.buckets.size >= this.sweepAt) this.sweep(now)
      bucket = { tokens: this.burst, updatedMs: now }
      this.buckets.set(key, bucket)
    }
    bucket.tokens = this.refilled(bucket, now)
    bucket.updatedMs = now
    if (bucket.tokens < 1) return { ok: false, retryAfterS: this.retryAfterS(bucket.tokens) }
    bucket.tokens -= 1
    return { ok: true, remaining: Math.floor(bucket.tokens), resetS: Math.ceil((this.burst - bucket.tokens) / this.rps) }
  }

  /** Seconds until `key` has a token again (0 when it has one). */
  waitS(key: string): number {
    const tokens = this.peek(key)
    return tokens >= 1 ? 0 : this.retryAfterS(tokens)
  }

  private retryAfterS(tokens: number): number {
    return Math.max(1, Math.ceil((1 - tokens) / this.rps))
  }

  // max(0, …): a clock that steps back (NTP) must not drain the bucket.
  private refilled(bucket: Bucket, now: number): number {
    return Math.min(this.burst, bucket.tokens + (Math.max(0, now - bucket.updatedMs) / 1_000) * this.rps)
  }

  private sweep(now: number): void {
    for (const [key, bucket] of this.buckets) if (this.refilled(bucket, now) >= this.burst) this.buckets.delete(key)
    this.sweepAt = Math.max(FIRST_SWEEP_AT, this.buckets.size * 2)
  }
}
