import type { ColdChainState } from '../../rules/index.js'
import type { NewEvent } from '../../src/events/outbox.js'
import type { ColdChainStore } from '../../src/telemetry/cold-chain-monitor.js'
import type { ReadingRow } from '../../src/timeseries/sink.js'

/**
 * The cold-chain monitor's store (src/telemetry/cold-chain/port.ts) in memory: stored readings by
 * delivery, the saved summaries, and the events, one per delivery and dedupe key as the outbox
 * keeps them. `beforeSave` runs at the start of each save (a transaction being written).
 */
export class FakeColdChainStore implements ColdChainStore {
  readonly stored = new Map<string, ReadingRow[]>()
  readonly summaries = new Map<string, ColdChainState>()
  /** Which save wrote each delivery's summary first (1-based). */
  readonly firstSavedIn = new Map<string, number>()
  readonly events: NewEvent[] = []
  saves = 0
  beforeSave: () => void = () => {}
  /** Answers readings(); by default what `stored` holds. */
  read: (deliveryId: string) => Promise<ReadingRow[]> = async (id) => [...(this.stored.get(id) ?? [])]

  readings(deliveryId: string): Promise<ReadingRow[]> {
    return this.read(deliveryId)
  }

  async announcedBreak(deliveryId: string): Promise<ColdChainState['broken']> {
    return this.summaries.get(deliveryId)?.broken ?? null
  }

  async save(summaries: readonly { deliveryId: string; state: ColdChainState }[], events: readonly NewEvent[]): Promise<void> {
    this.saves += 1
    this.beforeSave()
    for (const { deliveryId, state } of summaries) {
      this.summaries.set(deliveryId, structuredClone(state))
      if (!this.firstSavedIn.has(deliveryId)) this.firstSavedIn.set(deliveryId, this.saves)
    }
    for (const event of events) {
      const seen = this.events.some((e) => e.delivery_id === event.delivery_id && e.dedupe_key === event.dedupe_key)
      if (!seen) this.events.push(event)
    }
  }

  /** The types of the events saved, in order. */
  types(): string[] {
    return this.events.map((e) => e.type)
  }
}
