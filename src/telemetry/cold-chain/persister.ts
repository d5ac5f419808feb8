import type { Logger } from 'pino'
import type { DeliveryStates, Track } from './delivery-states.js'
import type { PendingEvents } from './event-emission.js'
import type { ColdChainStore } from './port.js'

// Summaries per transaction when no events crowd them out: one statement's worth in the SQL store.
const SUMMARIES_PER_TRANSACTION = 100
// However many deliveries raise events meanwhile, each of the tick's transactions also takes this
// many of its other summaries, so those cannot be put off for as long as events keep coming.
const OTHER_SUMMARIES_PER_TRANSACTION = 20

/**
 * Saves events and summaries, one save at a time. Events go out at once (reading → event latency)
 * with the summaries of the deliveries they concern; the other summaries wait for the tick, so a
 * busy second costs one summary write per delivery, not one per delivery per event. A request
 * made while a save runs joins the one queued after it instead of queueing another.
 */
export class Persister {
  private persisting: Promise<void> = Promise.resolve()
  private queued: { promise: Promise<void>; summaries: boolean } | null = null

  constructor(
    private readonly deps: {
      store: ColdChainStore
      states: DeliveryStates
      pending: PendingEvents
      logger: Logger
    },
  ) {}

  /** Saves the pending events, and with `summaries` every changed summary. Never rejects. */
  request(summaries: boolean): Promise<void> {
    if (this.queued) {
      // Not started yet: it will take whatever is pending when it starts.
      this.queued.summaries ||= summaries
      return this.queued.promise
    }
    const queued = { summaries, promise: Promise.resolve() }
    queued.promise = this.persisting
      .then(() => {
        this.queued = null
        return this.persist(queued.summaries)
      })
      .catch((err: unknown) => {
        this.deps.logger.error({ err }, 'cold-chain monitor: persisting events failed; will retry')
      })
    this.queued = queued
    this.persisting = queued.promise
    return queued.promise
  }

  private async persist(allSummaries: boolean): Promise<void> {
    const { store, states, pending } = this.deps
    // The tick's summaries (every delivery with new readings: a thousand at a time) go out
    // SUMMARIES_PER_TRANSACTION per transaction with the event loop free in between: written at
    // once they held it ~20-45 ms every second, which showed in PUBACK p99. Events that come up
    // meanwhile ride in the next of these transactions.
    const rest = allSummaries ? [...states.all()].filter((t) => t.dirty) : []
    for (let pass = 0; ; pass++) {
      if (pass > 0) await new Promise((resolve) => setImmediate(resolve))
      const taken = pending.take()
      const dirty = taken.tracks.filter((t) => t.dirty)
      const withEvents = new Set(dirty)
      let room = Math.max(SUMMARIES_PER_TRANSACTION - dirty.length, OTHER_SUMMARIES_PER_TRANSACTION)
      while (room > 0 && rest.length) {
        const t = rest.pop()!
        if (!t.dirty || withEvents.has(t)) continue
        dirty.push(t)
        room -= 1
      }
      if (taken.events.length === 0 && dirty.length === 0) return
      for (const t of dirty) t.dirty = false
      try {
        await store.save(summariesOf(dirty), taken.events)
      } catch (error) {
        for (const t of dirty) t.dirty = true
        pending.putBack(taken)
        throw error // the rest stay dirty: the next tick writes them
      }
      if (rest.length === 0) return
    }
  }
}

const summariesOf = (tracks: readonly Track[]) => tracks.map((t) => ({ deliveryId: t.binding.deliveryId, state: t.state }))
