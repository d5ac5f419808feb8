import type { RuleEvent } from '../../../rules/index.js'
import { iso } from '../../clock.js'
import type { NewEvent } from '../../events/outbox.js'
import type { Track } from './delivery-states.js'

/**
 * Rule events on their way to the outbox, as the API's event envelope wants them (docs/api.md,
 * Events), and the deliveries that raised them: their summaries go out with the events.
 */
export class PendingEvents {
  private events: NewEvent[] = []
  private raisedBy = new Set<Track>()

  get size(): number {
    return this.events.length
  }

  /** Queues the track's events (copied out: callers reuse their array); the track's summary goes with them. */
  add(track: Track, events: readonly RuleEvent[]): void {
    track.dirty = true
    if (events.length) this.raisedBy.add(track)
    const b = track.binding
    for (const event of events) {
      this.events.push({
        type: event.type,
        pharmacy_id: b.pharmacyId,
        fleet_id: b.fleetId,
        delivery_id: b.deliveryId,
        rx_id: b.rxId,
        data: { ...event.data, tote_id: track.toteId, at: iso(event.at) },
        dedupe_key: event.key,
      })
    }
  }

  /** The track's summary goes out with the next events, events or not (a recomputed delivery). */
  urgent(track: Track): void {
    track.dirty = true
    this.raisedBy.add(track)
  }

  /** Everything queued so far, emptied. */
  take(): { events: NewEvent[]; tracks: Track[] } {
    const taken = { events: this.events, tracks: [...this.raisedBy] }
    this.events = []
    this.raisedBy = new Set()
    return taken
  }

  /** Puts back what a failed write took, ahead of what came since. */
  putBack({ events, tracks }: { events: NewEvent[]; tracks: Track[] }): void {
    this.events = events.concat(this.events) // not unshift(...events): an outage's backlog can exceed the argument limit
    for (const t of tracks) this.raisedBy.add(t)
  }
}
