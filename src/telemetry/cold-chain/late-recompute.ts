import type { Logger } from 'pino'
import { initialColdChain, reconcile, type Reading, type RuleEvent } from '../../../rules/index.js'
import type { DeliveryStates } from './delivery-states.js'
import type { PendingEvents } from './event-emission.js'
import type { ColdChainStore } from './port.js'
import { RecentHistory } from './recent-history.js'

/**
 * Deliveries to recompute from their stored readings: up to what was judged (a late reading:
 * `everything` false), or from everything stored (readings given to the delivery after the fact:
 * true). A break a recompute reveals is added; nothing is retracted (rules/late.ts).
 *
 * Recomputes run on their own, one pass at a time, and hand their events and summaries to the
 * saves when done: a recompute reads the delivery's whole history, and the events of readings
 * that came in order must not wait behind a burst of them (readings dealt over several sessions
 * of an external broker arrive out of order).
 */
export class LateRecomputes {
  private readonly due = new Map<string, boolean>()
  private running: Promise<void> | null = null
  /** The delivery whose stored readings are being read, and the late readings judged for it meanwhile. */
  private reading: { deliveryId: string; lateMeanwhile: Reading[] } | null = null

  constructor(
    private readonly deps: {
      states: DeliveryStates
      store: ColdChainStore
      pending: PendingEvents
      logger: Logger
      /** Saves what the recomputes raised (Persister.request). */
      save(): Promise<void>
    },
  ) {}

  get size(): number {
    return this.due.size
  }

  /** A recompute of this delivery is due, or a pass that may be running one is under way. */
  awaits(deliveryId: string): boolean {
    return this.due.has(deliveryId) || this.running !== null
  }

  /** Something is due or a pass is under way: runSoon() has work to wait for. */
  get busy(): boolean {
    return this.due.size > 0 || this.running !== null
  }

  /**
   * Takes late readings of a delivery whose recompute from the store is due (its read will find
   * them: they are committed) or reading (they are added to its answer); false when none is. Judged
   * from memory instead, they would be judged without the older late readings that recompute is for.
   */
  absorbs(deliveryId: string, late: readonly Reading[]): boolean {
    if (this.due.has(deliveryId)) return true
    if (this.reading?.deliveryId !== deliveryId) return false
    this.reading.lateMeanwhile.push(...late.map((r) => ({ ts: r.ts, temp_c: r.temp_c })))
    return true
  }

  /** A recompute from everything covers a late one. */
  later(deliveryId: string, everything = false): void {
    if (everything || !this.due.has(deliveryId)) this.due.set(deliveryId, everything)
  }

  /**
   * Runs every due recompute, and those that come due meanwhile, then saves; resolves once saved.
   * A failed read stays due (the next tick tries again). Never rejects.
   */
  runSoon(): Promise<void> {
    // With nothing due, passes() would end before `running` is set and leave it set for good.
    if (!this.busy) return Promise.resolve()
    this.running ??= this.passes()
    return this.running
  }

  private async passes(): Promise<void> {
    try {
      while (this.due.size > 0) {
        try {
          await this.runDue()
        } catch (err) {
          this.deps.logger.error({ err }, 'cold-chain monitor: recomputing from the store failed; will retry')
          return
        } finally {
          await this.deps.save()
        }
      }
    } finally {
      this.running = null // no await since the loop's last check: a call in between started no pass of its own
    }
  }

  private async runDue(): Promise<void> {
    const { states, store, pending } = this.deps
    for (const [deliveryId, everything] of [...this.due]) {
      this.due.delete(deliveryId)
      const track = states.get(deliveryId)
      if (!track) continue
      // Readings judged while the store is read may be missing from its answer (committed after
      // the read began): those are added from memory. Not the others: the store's answer is the
      // truth about them (a backdated end takes readings off the delivery).
      const reading = { deliveryId, lateMeanwhile: [] as Reading[] }
      const stopRecording = track.history.recording()
      let judgedMeanwhile: Reading[] = []
      this.reading = reading
      let stored: Reading[]
      try {
        stored = await store.readings(deliveryId, false)
      } catch (error) {
        this.later(deliveryId, everything)
        throw error
      } finally {
        this.reading = null
        judgedMeanwhile = stopRecording()
      }
      if (states.get(deliveryId) !== track) continue // forgotten, or taken over by another copy, meanwhile
      const all = withMissing(stored, [...judgedMeanwhile, ...reading.lateMeanwhile])
      const upTo = everything ? Number.POSITIVE_INFINITY : track.state.lastTs
      const { profile } = track.binding
      const replayed = RecentHistory.replay(
        initialColdChain(profile, track.state.boundAt),
        profile,
        upTo === null ? [] : all.filter((r) => r.ts <= upTo),
      )
      const events: RuleEvent[] = []
      track.state = reconcile(track.state, replayed.state, replayed.events, events).state
      track.history = replayed.history
      pending.urgent(track) // the recomputed summary goes out now, events or not
      if (events.length) pending.add(track, events)
    }
  }
}

/** The stored readings (ts order) with those of `meanwhile` they lack, in ts order, one per ts (the stored one stands). */
function withMissing(stored: readonly Reading[], meanwhile: readonly Reading[]): readonly Reading[] {
  if (meanwhile.length === 0) return stored
  const storedTs = new Set(stored.map((r) => r.ts))
  const missing = meanwhile.filter((r) => !storedTs.has(r.ts))
  if (missing.length === 0) return stored
  return [...stored, ...missing].sort((a, b) => a.ts - b.ts)
}
