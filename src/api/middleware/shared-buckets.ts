import { sql } from 'kysely'
import type { Clock } from '../../clock.js'
import type { Db } from '../../store/schema.js'
import type { BucketStore, Spent, Want } from './bucket-store.js'

// Full buckets are deleted (a full bucket is the same as none) at most this often, by whichever
// request comes first: the table holds the buckets in use, not every address or client id seen.
const SWEEP_EVERY_MS = 60_000

/**
 * Token buckets in PostgreSQL (migration 0018), spent by every copy of the service: one
 * statement per request, whatever the number of buckets it spends from. The statement refills
 * each bucket for the time since its last use and takes a token if it has one, under the row's
 * lock, so two copies never spend the same token. When one bucket of the request was empty, the
 * tokens taken from the others are given back (a second statement, on refusals only).
 *
 * Time is each copy's clock; a copy whose clock is behind refills nothing (never a negative
 * refill), so clock skew between copies shortens no wait and lengthens one by at most the skew.
 */
export class SharedBuckets implements BucketStore {
  private nextSweepMs = 0

  constructor(
    private readonly db: Db,
    private readonly clock: Clock,
  ) {}

  async spend(wants: readonly Want[]): Promise<Spent[]> {
    const now = this.clock.now()
    this.sweepNowAndThen(now)
    const keyOf = (w: Want) => `${w.limit.name}:${w.key}`
    // Rows locked in one order by every copy: no deadlock between two requests of the same buckets.
    const rows = [...wants].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1))
    const values = rows.map((w) => sql`(${keyOf(w)}, ${w.limit.rps}, ${w.limit.burst}, ${w.limit.burst - 1}, 1, ${now})`)
    const refilled = sql`least(excluded.burst, b.tokens + greatest(0, excluded.updated_ms - b.updated_ms) / 1000.0 * excluded.rps)`
    const { rows: answers } = await sql<{ key: string; tokens: number; granted: number }>`
      insert into rate_limit_buckets as b (key, rps, burst, tokens, granted, updated_ms)
      values ${sql.join(values)}
      on conflict (key) do update set
        tokens = case when ${refilled} >= 1 then ${refilled} - 1 else ${refilled} end,
        granted = case when ${refilled} >= 1 then 1 else 0 end,
        updated_ms = greatest(b.updated_ms, excluded.updated_ms),
        rps = excluded.rps,
        burst = excluded.burst
      returning key, tokens, granted`.execute(this.db)
    const byKey = new Map(answers.map((a) => [a.key, a]))
    const all = wants.map((w) => ({ want: w, answer: byKey.get(keyOf(w))! }))
    if (all.every((a) => a.answer.granted === 1)) {
      return all.map(({ want, answer }) => ({
        ok: true,
        remaining: Math.floor(answer.tokens),
        resetS: Math.ceil((want.limit.burst - answer.tokens) / want.limit.rps),
      }))
    }
    const giveBack = all.filter((a) => a.answer.granted === 1).map((a) => a.answer.key)
    if (giveBack.length) {
      await this.db
        .updateTable('rate_limit_buckets')
        .set({ tokens: sql`least(burst, tokens + 1)` })
        .where('key', 'in', giveBack)
        .execute()
    }
    return all.map(({ want, answer }) =>
      answer.granted === 1
        ? { ok: false, remaining: Math.floor(answer.tokens + 1), retryAfterS: 0 }
        : { ok: false, remaining: 0, retryAfterS: Math.max(1, Math.ceil((1 - answer.tokens) / want.limit.rps)) },
    )
  }

  private sweepNowAndThen(now: number): void {
    if (now < this.nextSweepMs) return
    this.nextSweepMs = now + SWEEP_EVERY_MS
    // Not awaited: a failed sweep costs nothing but rows, and the next one retries.
    this.db
      .deleteFrom('rate_limit_buckets')
      .where(sql<boolean>`updated_ms + (burst - tokens) / rps * 1000 < ${now}`)
      .execute()
      .catch(() => {})
  }
}
