import type { Binding } from '../bindings.js'
import type { DeliveryStates } from './delivery-states.js'

export type OpenDelivery = { toteId: string; binding: Binding }

/**
 * Open cold-chain deliveries with a tote are watched even before their first reading, and those
 * no longer open are ended. Called on every dispatch: while a pass runs, later calls only leave
 * the newest list for one more pass (and wait for it), so 1,000 dispatches in a row are not 1,000
 * overlapping passes each reading every delivery not loaded yet.
 */
export class OpenDeliveryWatch {
  private watching: Promise<void> | null = null
  private next: readonly OpenDelivery[] | null = null

  constructor(
    private readonly states: DeliveryStates,
    /** The delivery is no longer open: judge what is held for it, save, and forget it. */
    private readonly end: (deliveryId: string) => Promise<void>,
  ) {}

  watch(open: readonly OpenDelivery[]): Promise<void> {
    this.next = open
    this.watching ??= this.passes()
    return this.watching
  }

  private async passes(): Promise<void> {
    let failure: unknown = null
    try {
      while (this.next !== null) {
        const open = this.next
        this.next = null
        // A pass that fails (a read) must not leave a newer list unwatched: go on; report only
        // if the last pass, which saw the newest list, failed too.
        try {
          await this.once(open)
          failure = null
        } catch (error) {
          failure = error
        }
      }
    } finally {
      this.watching = null // no await since the loop's last check: a call in between started no pass of its own
    }
    if (failure !== null) throw failure
  }

  private async once(open: readonly OpenDelivery[]): Promise<void> {
    const openIds = new Set(open.map((o) => o.binding.deliveryId))
    // One delivery that cannot be read now must not keep the others (or the clean-up below)
    // waiting. The loads go together: their reads of saved summaries and leases are gathered.
    let failure: unknown = null
    await Promise.all(
      open
        .filter(({ binding }) => binding.profile && !this.states.known(binding.deliveryId))
        .map(({ toteId, binding }) => this.states.load(toteId, binding).catch((error: unknown) => void (failure ??= error))),
    )
    this.states.forgetRemoteExcept(openIds)
    for (const id of [...this.states.ids()]) if (!openIds.has(id)) await this.end(id)
    if (failure !== null) throw failure
  }
}
