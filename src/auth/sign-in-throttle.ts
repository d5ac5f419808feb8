import type { Clock } from '../clock.js'

/** After 5 failed sign-ins within 15 minutes, an account or an address waits until the oldest falls out of the window. */
const MAX_FAILURES = 5
const FAILURE_WINDOW_MS = 15 * 60_000
// Bounds memory under a flood of distinct addresses or made-up accounts: the oldest keys go first.
const MAX_KEYS = 100_000

/**
 * NIST SP 800-63B §5.2.2 (rate limiting): online guessing is slowed per account (one account, many addresses)
 * and per address (one address, many accounts). Counted in this instance's memory; instances
 * behind a balancer each count their own share, which still caps guesses per instance.
 */
export class SignInThrottle {
  private readonly failures = new Map<string, number[]>()

  constructor(private readonly clock: Clock) {}

  /** Milliseconds to wait before the next attempt for any of `keys`, or 0. */
  waitMs(keys: string[]): number {
    const now = this.clock.now()
    let wait = 0
    for (const key of keys) {
      const recent = this.recent(key, now)
      if (recent.length >= MAX_FAILURES) wait = Math.max(wait, recent[recent.length - MAX_FAILURES]! + FAILURE_WINDOW_MS - now)
    }
    return wait
  }

  fail(keys: string[]): void {
    const now = this.clock.now()
    for (const key of keys) {
      const recent = this.recent(key, now)
      recent.push(now)
      this.failures.delete(key)
      this.failures.set(key, recent) // re-inserted: Map order is the eviction order
      if (this.failures.size > MAX_KEYS) this.failures.delete(this.failures.keys().next().value!)
    }
  }

  /** A success clears the account's count, not the address's (one address may be guessing many accounts). */
  succeed(accountKey: string): void {
    this.failures.delete(accountKey)
  }

  private recent(key: string, now: number): number[] {
    return (this.failures.get(key) ?? []).filter((at) => at > now - FAILURE_WINDOW_MS)
  }
}
