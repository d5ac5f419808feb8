import type { Logger } from 'pino'
import { recompute, type Reading, type RuleEvent } from '../../../rules/index.js'
import type { DeliveryStates } from './delivery-states.js'
import type { PendingEvents } from './event-emission.js'
import type { ColdChainStore } from './port.js'

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
      try {
        const track = states.get(deliveryId)
        if (!track) continue
        const judgedBefore = new Set(track.history.kept().map((r) => r.ts))
        const stored = await store.readings(deliveryId, false)
        // Readings judged while the store was read may be missing from what it returned (committed
        // after the read began): those are added from memory. Not the others: the store's answer
        // is the truth about them (a backdated end takes readings off the delivery).
        const meanwhile = track.history.kept().filter((r) => !judgedBefore.has(r.ts))
        const readings = withJudgedMeanwhile(stored, meanwhile)
        const events: RuleEvent[] = []
        const upTo = everything ? Number.POSITIVE_INFINITY : undefined
        track.state = recompute(track.state, track.binding.profile, readings, events, upTo).state
        track.history.reset(track.state)
        pending.urgent(track) // the recomputed summary goes out now, events or not
        if (events.length) pending.add(track, events)
      } catch (error) {
        this.later(deliveryId, everything)
        throw error
      }
    }
  }
}

/** The stored readings (ts order) with those judged meanwhile that they lack, in ts order, one per ts (the stored one stands). */
function withJudgedMeanwhile(stored: readonly Reading[], meanwhile: readonly Reading[]): readonly Reading[] {
  if (meanwhile.length === 0) return stored
  const storedTs = new Set(stored.map((r) => r.ts))
  const missing = meanwhile.filter((r) => !storedTs.has(r.ts))
  if (missing.length === 0) return stored
  return [...stored, ...missing].sort((a, b) => a.ts - b.ts)
}
