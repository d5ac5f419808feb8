import { setTimeout as sleep } from 'node:timers/promises'
import { sql } from 'kysely'
import type { Logger } from 'pino'
import { iso, type Clock } from '../clock.js'
import type { Dialect } from '../store/dialect.js'
import { expireRecords } from '../store/record-expiry.js'
import type { Db } from '../store/schema.js'
import type { ReadingSink } from './sink.js'

const DAY_MS = 86_400_000

export type RetentionPolicy = {
  /** RETENTION_RECORDS_DAYS: a delivery's record, and the readings bound to it, after it ends. */
  recordsDays: number
  /** RETENTION_UNBOUND_DAYS: readings bound to no delivery. */
  unboundDays: number
  /** RETENTION_ATTEMPTS_DAYS: webhook delivery attempts and finished webhook messages. */
  attemptsDays: number
  /** RETENTION_BATCH: readings one `expire` call removes at most (and rows of each other table a batch). */
  batch: number
  /** RETENTION_PAUSE_MS: rest between two batches of one pass. */
  pauseMs: number
}

export type RetentionMetrics = {
  removed(kind: string, n: number): void
  /** A readings batch the store deferred (see ExpiryResult). */
  deferred(): void
  passDone(atMs: number, seconds: number): void
  /** Binding changes still pending after the pass applied what it could. */
  followsPending(n: number): void
}

export type PassResult = { removed: number; batches: number; complete: boolean }

/** Another kind of row the expirer trims, after the records: removes at most `limit` rows, answers how many went. */
export type Trim = { name: string; trim: (limit: number) => Promise<number> }

/**
 * Background expiry (docs/operations.md, Retention): the service's one expirer. A pass goes batch
 * by batch, until a batch leaves nothing, through the tables that are not records
 * (store/record-expiry.ts: idempotency keys, webhook attempts, sessions, refresh tokens, …), then
 * the `trims` (drivers' positions), then the readings bound to no delivery older than RETENTION_UNBOUND_DAYS and the readings of
 * deliveries whose record ended more than RETENTION_RECORDS_DAYS ago; the readings of open
 * deliveries, and of deliveries ended inside their retention, stay whatever their age.
 *
 * - Small batches (`expire` with `limit`), a pause between them: ingest's writes wait at most one
 *   batch's statement, never a pass.
 * - What stays is read again before every batch, from the deliveries as they are then: a binding
 *   changed backdated in the middle of a pass is seen by the next batch. Within one batch the
 *   adapters only remove a row whose stored binding still matches (see each adapter's `expire`).
 * - Several copies on one PostgreSQL: one pass at a time, under a session advisory lock taken on a
 *   connection held for the pass. A copy killed mid-pass loses its connection, and the lock with
 *   it; the batch it was in rolls back whole (one statement), and the next pass starts over.
 * - An adapter without `expire` keeps every reading.
 */
export class Expirer {
  private stopping = false
  private timer: NodeJS.Timeout | null = null
  private running: Promise<unknown> | null = null

  constructor(
    private readonly deps: {
      db: Db
      dialect: Dialect
      sink: ReadingSink
      clock: Clock
      logger: Logger
      policy: RetentionPolicy
      metrics?: RetentionMetrics
      /** Trimmed batch by batch in every pass, before the readings (drivers' positions). */
      trims?: readonly Trim[]
      /**
       * Applies the binding changes the stored readings have not followed yet; answers how many are
       * still pending. Until a change is followed its readings are bound as before it
       * (telemetry/binding-follow.ts): a backdated dispatch's are still an idle tote's.
       */
      followPendingBindings?: () => Promise<number>
      /** How many of those are bound from before the given time (BindingFollower.pendingBoundBefore). */
      pendingBindingsBoundBefore?: (boundFromBeforeMs: number) => Promise<number>
    },
  ) {}

  /** Runs a pass now and then every `intervalMs` after the previous one ends (never two at once). */
  start(intervalMs: number): void {
    const next = () => {
      if (this.stopping) return
      this.timer = setTimeout(() => {
        this.running = this.pass()
          .catch((err: unknown) => this.deps.logger.warn({ err }, 'expiry pass failed'))
          .finally(next)
      }, intervalMs)
      this.timer.unref()
    }
    this.stopping = false
    next()
  }

  /** Stops after the batch in progress (if any). */
  async stop(): Promise<void> {
    this.stopping = true
    if (this.timer) clearTimeout(this.timer)
    await this.running
  }

  /** The deliveries whose readings stay whatever their age, as the store says now. */
  async keepDeliveries(boundBeforeMs: number): Promise<Set<string>> {
    const cutoff = iso(boundBeforeMs)
    // Open (no end yet), or ended inside the retention and bound from before the cutoff: only those
    // can have readings older than it. Both halves are served by indexes (0065/0066, 0061). The
    // record ends with the binding (`bound_to`, the last end), not at `ended_at`: that is the first
    // priced end, a failed attempt's when the delivery went out again and was delivered later.
    const rows = await this.deps.db
      .selectFrom('deliveries')
      .select('id')
      .where('tote_id', 'is not', null)
      .where((eb) => eb.or([eb('bound_to', 'is', null), eb.and([eb('bound_from', '<', cutoff), eb('bound_to', '>=', cutoff)])]))
      .execute()
    return new Set(rows.map((r) => r.id))
  }

  /** One pass: batches until nothing expired is left (or the expirer stops). */
  async pass(): Promise<PassResult> {
    const { dialect } = this.deps
    if (dialect !== 'postgres') return this.batches()
    // One copy at a time: the lock lives as long as this connection (a killed copy's goes with it).
    return this.deps.db.connection().execute(async (conn) => {
      const key = sql`hashtext('rxtrace.expirer.' || current_schema())`
      const { rows } = await sql<{ held: boolean }>`select pg_try_advisory_lock(${key}) as held`.execute(conn)
      if (!rows[0]?.held) return { removed: 0, batches: 0, complete: false }
      try {
        return await this.batches()
      } finally {
        await sql`select pg_advisory_unlock(${key})`.execute(conn)
      }
    })
  }

  private async batches(): Promise<PassResult> {
    const { db, sink, clock, policy, logger, metrics } = this.deps
    const started = clock.now()
    const records: Record<string, number> = {}
    await this.batchByBatch(async () => {
      const batch = await expireRecords(db, started, policy.attemptsDays, policy.batch)
      for (const [table, n] of Object.entries(batch)) {
        metrics?.removed(table, n)
        records[table] = (records[table] ?? 0) + n
      }
      return Object.values(batch).some((n) => n >= policy.batch)
    })
    if (Object.values(records).some((n) => n > 0)) logger.info({ removed: records }, 'expired records past their retention')
    for (const { name, trim } of this.deps.trims ?? []) {
      let trimmed = 0
      await this.batchByBatch(async () => {
        const n = await trim(policy.batch)
        trimmed += n
        metrics?.removed(name, n)
        return n >= policy.batch
      })
      if (trimmed > 0) logger.info({ removed: { [name]: trimmed } }, 'expired rows past their retention')
    }
    let removed = 0
    let batches = 0
    let deferred = 0
    const expire = sink.expire?.bind(sink)
    // While a binding change is pending, no reading goes as an idle tote's: some of them are a
    // delivery's that has not got them yet. Readings past the records window still go; the pass is
    // not complete, so rxtrace_retention_lag_seconds shows it. A dispatch backdated past the idle
    // window during the pass is seen by the next batch: until one is found, they are counted again
    // before each.
    const pending = (expire && (await this.deps.followPendingBindings?.())) || 0
    let heldBack = pending > 0
    metrics?.followsPending(pending)
    if (pending > 0) logger.warn({ pending }, 'idle totes’ readings wait: tote binding changes not applied to the stored readings yet')
    const stoppedMidPass =
      expire !== undefined &&
      (await this.batchByBatch(async () => {
        const now = clock.now()
        const unboundBeforeMs = now - policy.unboundDays * DAY_MS
        if (!heldBack && batches > 0 && this.deps.pendingBindingsBoundBefore) {
          const marked = await this.deps.pendingBindingsBoundBefore(unboundBeforeMs)
          if (marked > 0) {
            heldBack = true
            metrics?.followsPending(marked)
            logger.warn(
              { pending: marked },
              'idle totes’ readings wait: a tote binding change made during the expiry pass is not applied yet',
            )
          }
        }
        const boundBeforeMs = now - policy.recordsDays * DAY_MS
        const result = await expire({
          unboundBeforeMs: heldBack ? 0 : unboundBeforeMs,
          boundBeforeMs,
          keepDeliveries: await this.keepDeliveries(boundBeforeMs),
          limit: policy.batch,
        })
        batches++
        removed += result.removed
        metrics?.removed('readings', result.removed)
        if (result.deferred) {
          deferred++
          metrics?.deferred()
        }
        return result.more
      }))
    if (stoppedMidPass) {
      logger.info({ removed, batches, deferred }, 'reading expiry stopped mid-pass; the next pass goes on')
      return { removed, batches, complete: false }
    }
    const seconds = (clock.now() - started) / 1_000
    if (!heldBack) metrics?.passDone(clock.now(), seconds)
    if (removed > 0) logger.info({ removed, batches, deferred, seconds }, 'expired readings past their retention')
    return { removed, batches, complete: !heldBack }
  }

  /**
   * Runs `batch` (which answers whether more may be left) until one leaves nothing, resting
   * RETENTION_PAUSE_MS between two; answers true when the expirer stopped with more left.
   */
  private async batchByBatch(batch: () => Promise<boolean>): Promise<boolean> {
    const { pauseMs } = this.deps.policy
    for (;;) {
      if (!(await batch())) return false
      if (this.stopping) return true
      if (pauseMs > 0) await sleep(pauseMs, undefined, { ref: false })
    }
  }
}
