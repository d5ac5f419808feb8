import { recompute, type RuleEvent } from '../../../rules/index.js'
import type { DeliveryStates } from './delivery-states.js'
import type { PendingEvents } from './event-emission.js'
import type { ColdChainStore } from './port.js'

/**
 * Deliveries to recompute from their stored readings before the next save: up to what was judged
 * (a late reading: `everything` false), or from everything stored (readings given to the delivery
 * after the fact: true). A break a recompute reveals is added; nothing is retracted (rules/late.ts).
 */
export class LateRecomputes {
  private readonly due = new Map<string, boolean>()

  get size(): number {
    return this.due.size
  }

  /** A recompute from everything covers a late one. */
  later(deliveryId: string, everything = false): void {
    if (everything || !this.due.has(deliveryId)) this.due.set(deliveryId, everything)
  }

  /** Runs every due recompute; a failed read stays due (the next save tries again) and rejects. */
  async run(states: DeliveryStates, store: ColdChainStore, pending: PendingEvents): Promise<void> {
    for (const [deliveryId, everything] of [...this.due]) {
      this.due.delete(deliveryId)
      try {
        const track = states.get(deliveryId)
        if (!track) continue
        const stored = await store.readings(deliveryId)
        const events: RuleEvent[] = []
        track.state = recompute(track.state, track.binding.profile, stored, events, everything ? Number.POSITIVE_INFINITY : undefined).state
        pending.urgent(track) // the recomputed summary goes out now, events or not
        if (events.length) pending.add(track, events)
      } catch (error) {
        this.later(deliveryId, everything)
        throw error
      }
    }
  }
}
