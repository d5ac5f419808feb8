import type { Clock } from '../clock.js'

/** After 5 failed sign-ins within 15 minutes, an account or an address waits until the oldest falls out of the window. */
const MAX_FAILURES = 5
export const FAILURE_WINDOW_MS = 15 * 60_000
// Bounds memory under a flood of distinct addresses or made-up accounts: the oldest keys go first.
const MAX_KEYS = 100_000

/**
 * NIST SP 800-63B §5.2.2 (rate limiting): online guessing is slowed per account (one account, many addresses)
 * and per address (one address, many accounts). Keys are `account:<email>` and `address:<ip>`.
 */
export type SignInThrottle = {
  /** Milliseconds to wait before the next attempt for any of `keys`, or 0. */
  waitMs(keys: string[]): Promise<number>
  fail(keys: string[]): Promise<void>
  /** A success clears the account's count, not the address's (one address may be guessing many accounts). */
  succeed(accountKey: string): Promise<void>
}

/** The wait once a key has MAX_FAILURES within the window: until the oldest of the last five falls out of it. */
export function waitAfter(failuresAt: readonly number[], now: number): number {
  const recent = failuresAt.filter((at) => at > now - FAILURE_WINDOW_MS).sort((a, b) => a - b)
  return recent.length >= MAX_FAILURES ? Math.max(0, recent[recent.length - MAX_FAILURES]! + FAILURE_WINDOW_MS - now) : 0
}

/**
 * Counted in this process's memory: the store of one process on SQLite. With PostgreSQL the
 * copies count together (shared-sign-in-throttle.ts).
 */
export class MemorySignInThrottle implements SignInThrottle {
  private readonly failures = new Map<string, number[]>()

  constructor(private readonly clock: Clock) {}

  async waitMs(keys: string[]): Promise<number> {
    const now = this.clock.now()
    return Math.max(0, ...keys.map((key) => waitAfter(this.recent(key, now), now)))
  }

  async fail(keys: string[]): Promise<void> {
    const now = this.clock.now()
    for (const key of keys) {
      const recent = this.recent(key, now)
      recent.push(now)
      this.failures.delete(key)
      this.failures.set(key, recent) // re-inserted: Map order is the eviction order
      if (this.failures.size > MAX_KEYS) this.failures.delete(this.failures.keys().next().value!)
    }
  }

  async succeed(accountKey: string): Promise<void> {
    this.failures.delete(accountKey)
  }

  private recent(key: string, now: number): number[] {
    return (this.failures.get(key) ?? []).filter((at) => at > now - FAILURE_WINDOW_MS)
  }
}
