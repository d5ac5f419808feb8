/**
 * The driver app's offline queue, in plain TypeScript (no React Native import, so it is tested
 * without a device). A custody action is stamped with `occurred_at` when the driver does it, kept
 * in storage, and sent when the phone is online; the API records the time it happened, not the
 * time it arrived. Each action has its own Idempotency-Key, so a retry after a lost answer is
 * answered from the first request instead of acting twice.
 */

export type CustodyAction = 'pickup' | 'handoff' | 'deliver' | 'fail' | 'return'

export interface QueuedAction {
  /** Also the request's Idempotency-Key: the same on every retry. */
  id: string
  delivery_id: string
  action: CustodyAction
  /** The action's body without `occurred_at` (e.g. `{from, to, signature}` or `{verification}`). */
  body: Record<string, unknown>
  /** RFC 3339 UTC: when the driver did it. */
  occurred_at: string
  attempts: number
}

/** AsyncStorage's shape (`@react-native-async-storage/async-storage`), or anything like it. */
export interface QueueStorage {
  getItem(key: string): Promise<string | null>
  setItem(key: string, value: string): Promise<void>
}

/** NetInfo's shape, reduced: whether the phone is online now, and a way to hear when that changes. */
export interface Connectivity {
  isOnline(): boolean | Promise<boolean>
  subscribe(listener: (online: boolean) => void): () => void
}

/**
 * What became of one send: `done` (2xx), `retry` (no answer, 5xx, 429, or a request still in
 * progress: keep it and try again later) or `rejected` (the API refused it for good, e.g. 409
 * invalid_transition or 422: it leaves the queue and the app is told).
 */
export type SendOutcome = { kind: 'done' } | { kind: 'retry'; reason: string } | { kind: 'rejected'; status: number; problem: unknown }
export type Sender = (action: QueuedAction) => Promise<SendOutcome>

export interface OfflineQueueOptions {
  storage: QueueStorage
  connectivity: Connectivity
  send: Sender
  /** Storage key; one queue per signed-in driver. */
  key?: string
  now?: () => number
  newId?: () => string
  onRejected?: (action: QueuedAction, outcome: Extract<SendOutcome, { kind: 'rejected' }>) => void
}

const randomId = () => `act_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 12)}`

export class OfflineQueue {
  private actions: QueuedAction[] = []
  private flushing: Promise<void> | undefined
  private again = false
  private unsubscribe: (() => void) | undefined
  private readonly key: string
  private readonly now: () => number
  private readonly newId: () => string

  private constructor(private readonly options: OfflineQueueOptions) {
    this.key = options.key ?? 'rxtrace.offline-queue'
    this.now = options.now ?? Date.now
    this.newId = options.newId ?? randomId
  }

  /** Restores what an earlier run left, replays it when online, and from then on whenever the phone comes back online. */
  static async open(options: OfflineQueueOptions): Promise<OfflineQueue> {
    const queue = new OfflineQueue(options)
    const saved = await options.storage.getItem(queue.key)
    queue.actions = saved ? (JSON.parse(saved) as QueuedAction[]) : []
    queue.unsubscribe = options.connectivity.subscribe((online) => {
      if (online) void queue.flush()
    })
    await queue.flush()
    return queue
  }

  /** Actions not yet accepted by the API, oldest first. */
  get pending(): readonly QueuedAction[] {
    return this.actions
  }

  /** Records an action now (stamped with the driver's clock unless `occurred_at` is given), then tries to send. */
  async enqueue(action: {
    delivery_id: string
    action: CustodyAction
    body: Record<string, unknown>
    occurred_at?: string
  }): Promise<QueuedAction> {
    const queued: QueuedAction = {
      id: this.newId(),
      delivery_id: action.delivery_id,
      action: action.action,
      body: action.body,
      occurred_at: action.occurred_at ?? new Date(this.now()).toISOString(),
      attempts: 0,
    }
    this.actions.push(queued)
    await this.save() // kept before anything is sent: an app killed now loses nothing
    void this.flush()
    return queued
  }

  /**
   * Sends what is queued, oldest first, one at a time (a delivery's actions must reach the API in
   * the order they happened). Stops at the first action to retry. A call while one runs joins it
   * and makes it go round once more: the running one may have judged the phone offline just
   * before the call that says it is back.
   */
  flush(): Promise<void> {
    if (this.flushing) {
      this.again = true
      return this.flushing
    }
    this.flushing = (async () => {
      do {
        this.again = false
        await this.drain()
      } while (this.again)
    })().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  close(): void {
    this.unsubscribe?.()
  }

  private async drain(): Promise<void> {
    while (this.actions.length > 0 && (await this.options.connectivity.isOnline())) {
      const head = this.actions[0]!
      head.attempts++
      let outcome: SendOutcome
      try {
        outcome = await this.options.send(head)
      } catch (error) {
        outcome = { kind: 'retry', reason: error instanceof Error ? error.message : String(error) }
      }
      if (outcome.kind === 'retry') {
        await this.save()
        return
      }
      this.actions.shift()
      await this.save()
      if (outcome.kind === 'rejected') this.options.onRejected?.(head, outcome)
    }
  }

  private save(): Promise<void> {
    return this.options.storage.setItem(this.key, JSON.stringify(this.actions))
  }
}
