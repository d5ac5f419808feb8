import { setTimeout as sleep } from 'node:timers/promises'
import type { Logger } from 'pino'
import { iso } from '../clock.js'
import type { Db } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/index.js'
import type { ToteBindings } from './bindings.js'
import type { ColdChainMonitor } from './cold-chain-monitor.js'
import type { GroupCommitter } from './group-commit.js'
import { openColdChainBindings } from './open-deliveries.js'

// Applying a binding change to stored readings: attempts, and the first pause between them (it grows).
const FOLLOW_BINDING_ATTEMPTS = 3
const FOLLOW_BINDING_RETRY_MS = 1_000

export type BindingFollowDeps = {
  db: Db
  bindings: Pick<ToteBindings, 'ofDelivery'>
  committer: Pick<GroupCommitter, 'settled'>
  monitor: Pick<ColdChainMonitor, 'hold' | 'release' | 'reattributed' | 'watchOpenDeliveries'>
  sink: Pick<ReadingSink, 'attribute'>
  logger: Logger
}

/**
 * Stored readings follow a tote's binding (docs/architecture.md, A binding recorded late).
 *
 * A dispatch or an end may be recorded after readings inside its interval were stored (an
 * earlier occurred_at, e.g. from a driver app that was offline): the stored readings follow the
 * binding (docs/api.md, `occurred_at`), and a delivery given readings is judged again. The tote's new readings
 * wait meanwhile (monitor.hold), so none is judged without them. A backdated end only takes
 * later readings off the delivery's trace; what was judged and announced stands. Other
 * copies on one PostgreSQL hear of the binding at once (a NOTIFY, see shared-store.ts) and do the
 * same: their readings stored meanwhile with the old interval follow it, and the copy that
 * evaluates the delivery rebuilds its state (`recompute`: the readings may have been
 * attributed by the copy that made the binding).
 */
export class BindingFollower {
  constructor(private readonly deps: BindingFollowDeps) {}

  /** Tells the monitor which deliveries' sensors must be heard: the cold-chain deliveries bound right now. */
  async watchOpenDeliveries(): Promise<void> {
    await this.deps.monitor.watchOpenDeliveries(await openColdChainBindings(this.deps.db))
  }

  /**
   * After a crash between an action's commit and its follow, a failed follow, or readings another
   * instance bound with a stale interval: open deliveries claim their stored readings at start
   * (one indexed range per delivery on SQLite; two count queries on QuestDB), and every binding
   * change still pending is followed.
   */
  async reattributeOpenDeliveries(): Promise<void> {
    for (const { toteId, binding } of await openColdChainBindings(this.deps.db)) {
      try {
        await this.deps.sink.attribute(toteId, binding)
      } catch (err) {
        // A start on a full disk still serves reads; the delivery's readings are claimed by its next binding change.
        this.deps.logger.warn(
          { err, toteId, deliveryId: binding.deliveryId },
          'claiming an open delivery’s stored readings at start failed',
        )
      }
    }
    await this.followPending()
  }

  /**
   * Follows every binding change whose readings have not followed it (a crash after its commit,
   * or a store that failed every retry; migration 0067), ended deliveries' too. Resolves with
   * how many are left pending.
   */
  async followPending(): Promise<number> {
    const pending = await this.marked().select(['id', 'tote_id']).execute()
    let left = 0
    for (const { id, tote_id } of pending) {
      try {
        await this.followOnce(tote_id!, id, false)
      } catch (err) {
        left++
        this.deps.logger.warn({ err, toteId: tote_id, deliveryId: id }, 'applying a pending tote binding change failed; tried again later')
      }
    }
    if (pending.length > 0) await this.watchAfterFollow()
    return left
  }

  /**
   * How many pending binding changes are bound from before `boundFromBeforeMs`. The expirer asks
   * with its idle cutoff: only such a dispatch claims readings it could remove as an idle tote's
   * (every dispatch is marked until its follow, a moment later).
   */
  async pendingBoundBefore(boundFromBeforeMs: number): Promise<number> {
    const [row] = await this.marked()
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('bound_from', '<', iso(boundFromBeforeMs))
      .execute()
    return Number(row?.n ?? 0)
  }

  /** Deliveries with a binding change their readings have not followed yet (migration 0067). */
  private marked() {
    return this.deps.db.selectFrom('deliveries').where('follow_pending', 'is not', null).where('tote_id', 'is not', null)
  }

  /**
   * Follows with retries: a failure (a store that is briefly unavailable) is tried again a few
   * times; after that followPending catches up (at the next start, and before every expiry
   * pass). Never rejects.
   */
  async follow(toteId: string, deliveryId: string, recompute = false): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const failed = await this.followOnce(toteId, deliveryId, recompute).then(
        () => null,
        (err: unknown) => ({ err }),
      )
      await this.watchAfterFollow()
      if (failed === null) return
      const final = attempt >= FOLLOW_BINDING_ATTEMPTS
      this.deps.logger[final ? 'error' : 'warn'](
        { err: failed.err, toteId, deliveryId, attempt },
        `applying a tote binding change failed${final ? '' : '; retrying'}`,
      )
      if (final) return
      await sleep(FOLLOW_BINDING_RETRY_MS * attempt, undefined, { ref: false }) // never keeps a stopping process up
    }
  }

  /** The monitor hears of the deliveries open now; a failure is logged, and the 5 s refresh reads them again. */
  private watchAfterFollow(): Promise<void> {
    return this.watchOpenDeliveries().catch((err: unknown) => this.deps.logger.warn({ err }, 'reading the open deliveries failed'))
  }

  private async followOnce(toteId: string, deliveryId: string, recompute: boolean): Promise<void> {
    const { db, monitor, bindings, committer, sink } = this.deps
    monitor.hold(toteId)
    try {
      // The mark is read with the binding: a change made after this read leaves its own, which this follow does not clear.
      const { binding, followPending: pending } = await bindings.ofDelivery(toteId, deliveryId)
      if (binding) {
        await committer.settled() // readings bound with the old intervals are stored first
        if ((await sink.attribute(toteId, binding)) || recompute) await monitor.reattributed(deliveryId)
      }
      if (pending !== null)
        await db
          .updateTable('deliveries')
          .set({ follow_pending: null })
          .where('id', '=', deliveryId)
          .where('follow_pending', '=', pending)
          .execute()
    } finally {
      monitor.release(toteId)
    }
  }
}
