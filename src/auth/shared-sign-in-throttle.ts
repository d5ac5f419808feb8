import type { Clock } from '../clock.js'
import type { Db } from '../store/schema.js'
import { FAILURE_WINDOW_MS, waitAfter, type SignInThrottle } from './sign-in-throttle.js'

// Failures older than the window are deleted at most this often, by whichever sign-in comes first.
const PRUNE_EVERY_MS = 60_000

/**
 * Failed sign-ins in PostgreSQL (migration 0018), counted by every copy of the service together:
 * one row per failure and key, read back for the last 15 minutes. A sign-in costs one more round
 * trip to check (it already costs a password hash), and a failure one insert.
 */
export class SharedSignInThrottle implements SignInThrottle {
  private nextPruneMs = 0

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async waitMs(keys: string[]): Promise<number> {
    const now = this.clock.now()
    const rows = await this.db
      .selectFrom('sign_in_failures')
      .select(['key', 'at_ms'])
      .where('key', 'in', keys)
      .where('at_ms', '>', now - FAILURE_WINDOW_MS)
      .execute()
    return Math.max(
      0,
      ...keys.map((key) =>
        waitAfter(
          rows.filter((r) => r.key === key).map((r) => Number(r.at_ms)),
          now,
        ),
      ),
    )
  }

  async fail(keys: string[]): Promise<void> {
    const now = this.clock.now()
    await this.db
      .insertInto('sign_in_failures')
      .values(keys.map((key) => ({ key, at_ms: now })))
      .execute()
    if (now >= this.nextPruneMs) {
      this.nextPruneMs = now + PRUNE_EVERY_MS
      await this.db
        .deleteFrom('sign_in_failures')
        .where('at_ms', '<=', now - FAILURE_WINDOW_MS)
        .execute()
    }
  }

  async succeed(accountKey: string): Promise<void> {
    await this.db.deleteFrom('sign_in_failures').where('key', '=', accountKey).execute()
  }
}
