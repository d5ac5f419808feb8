/**
 * The driver app's offline queue, in plain TypeScript (no React Native import, so it is tested
 * without a device). A custody action is stamped with `occurred_at` when the driver does it, kept
 * in storage, and sent when the phone is online; the API records the time it happened, not the
 * time it arrived. Each action has its own Idempotency-Key, so a retry after a lost answer is
 * answered from the first request instead of acting twice.
 *
 * Proof-of-delivery images are queued too (`enqueue`'s `uploads`), ahead of the `deliver` that
 * names them: that `deliver` holds an `UploadRef` where the API wants an `at_…` id, and the
 * queue puts the id the upload was answered with in its place, in the same storage write that
 * drops the upload. An upload needs no Idempotency-Key: the API answers the same image sent again
 * for the same delivery with the same attachment.
 */

export type CustodyAction = 'pickup' | 'handoff' | 'deliver' | 'fail' | 'reattempt' | 'return'

/** Why an attempt failed: `fail`'s `reason` (its `note` says what happened, in the driver's words). */
export const failReasons = ['patient_unavailable', 'address_problem', 'refused', 'unsafe', 'other'] as const
export type FailReason = (typeof failReasons)[number]

/** An image the app's own camera or signature pad produced: a file URI it keeps until sent, or the bytes in base64. */
export type ImageSource =
  { uri: string; content_type: 'image/jpeg' | 'image/png' } | { base64: string; content_type: 'image/jpeg' | 'image/png' }

/** Stands in a queued action's body for the `at_…` id of an upload queued before it. */
export type UploadRef = { $upload: string }
export const uploadRef = (uploadId: string): UploadRef => ({ $upload: uploadId })

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

/** An image to `POST /v1/deliveries/{id}/attachments`, queued before the action that names it (by its `id`, in an `UploadRef`). */
export interface QueuedUpload {
  id: string
  delivery_id: string
  action: 'upload'
  image: ImageSource
  occurred_at: string
  attempts: number
}

export type QueuedItem = QueuedAction | QueuedUpload

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
 * invalid_transition or 422: it leaves the queue and the app is told). An upload's `done` carries
 * the `attachment` the API answered: its id replaces the upload's `UploadRef`s.
 */
export type SendOutcome =
  | { kind: 'done'; attachment?: { id: string; sha256: string } }
  | { kind: 'retry'; reason: string }
  | { kind: 'rejected'; status: number; problem: unknown }
export type Sender = (item: QueuedItem) => Promise<SendOutcome>

export interface OfflineQueueOptions {
  storage: QueueStorage
  connectivity: Connectivity
  send: Sender
  /** Storage key; one queue per signed-in driver. */
  key?: string
  now?: () => number
  newId?: () => string
  /**
   * An item the API refused for good. An action naming an upload that was refused is not sent: it
   * is reported here too, with status 424 and `problem.code` `upload_rejected`.
   */
  onRejected?: (item: QueuedItem, outcome: Extract<SendOutcome, { kind: 'rejected' }>) => void
}

const randomId = () => `act_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 12)}`

export class OfflineQueue {
  private actions: QueuedItem[] = []
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
    queue.actions = saved ? (JSON.parse(saved) as QueuedItem[]) : []
    queue.unsubscribe = options.connectivity.subscribe((online) => {
      if (online) void queue.flush()
    })
    await queue.flush()
    return queue
  }

  /** Actions not yet accepted by the API, oldest first. */
  get pending(): readonly QueuedItem[] {
    return this.actions
  }

  /**
   * Records an action now (stamped with the driver's clock unless `occurred_at` is given), then
   * tries to send. `uploads` are images to send before it, each under a name its body uses as
   * `uploadRef(name)` where the API wants the `at_…` id; they are queued with it in one write.
   */
  async enqueue(action: {
    delivery_id: string
    action: CustodyAction
    body: Record<string, unknown>
    occurred_at?: string
    uploads?: Record<string, ImageSource>
  }): Promise<QueuedAction> {
    const occurred_at = action.occurred_at ?? new Date(this.now()).toISOString()
    const uploads: QueuedUpload[] = []
    let body = action.body
    for (const [name, image] of Object.entries(action.uploads ?? {})) {
      const upload: QueuedUpload = { id: this.newId(), delivery_id: action.delivery_id, action: 'upload', image, occurred_at, attempts: 0 }
      uploads.push(upload)
      body = resolve(body, name, uploadRef(upload.id)) as Record<string, unknown>
    }
    const named = new Set(uploads.map((u) => u.id))
    for (const key of refsIn(body)) if (!named.has(key)) throw new Error(`the body names an upload "${key}" that is not among its uploads`)
    const queued: QueuedAction = {
      id: this.newId(),
      delivery_id: action.delivery_id,
      action: action.action,
      body,
      occurred_at,
      attempts: 0,
    }
    this.actions.push(...uploads, queued)
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
      let outcome: SendOutcome
      const unresolved = head.action === 'upload' ? [] : [...refsIn(head.body)]
      if (unresolved.length > 0) {
        // Its upload was refused for good (a resolved one would have been replaced by its id): not
        // sent, and told like a refusal, 424 Failed Dependency (RFC 4918 §11.4).
        outcome = {
          kind: 'rejected',
          status: 424,
          problem: { code: 'upload_rejected', detail: 'An image this action names was refused by the API.', uploads: unresolved },
        }
      } else {
        head.attempts++
        try {
          outcome = await this.options.send(head)
        } catch (error) {
          outcome = { kind: 'retry', reason: error instanceof Error ? error.message : String(error) }
        }
      }
      if (outcome.kind === 'retry') {
        await this.save()
        return
      }
      this.actions.shift()
      if (head.action === 'upload' && outcome.kind === 'done') {
        const attachment = outcome.attachment
        if (attachment) {
          for (const a of this.actions)
            if (a.action !== 'upload') a.body = resolve(a.body, head.id, attachment.id) as Record<string, unknown>
        }
      }
      await this.save() // the upload leaves and its id takes its place in one write
      if (outcome.kind === 'rejected') this.options.onRejected?.(head, outcome)
    }
  }

  private save(): Promise<void> {
    return this.options.storage.setItem(this.key, JSON.stringify(this.actions))
  }
}

const isRef = (value: unknown): value is UploadRef =>
  typeof value === 'object' &&
  value !== null &&
  typeof (value as { $upload?: unknown }).$upload === 'string' &&
  Object.keys(value).length === 1

/** The upload keys a body names. */
function* refsIn(value: unknown): Generator<string> {
  if (isRef(value)) yield value.$upload
  else if (Array.isArray(value)) for (const v of value) yield* refsIn(v)
  else if (typeof value === 'object' && value !== null) for (const v of Object.values(value)) yield* refsIn(v)
}

/** The body with every reference to `key` replaced (by the attachment id, or by the queued upload's reference). */
function resolve(value: unknown, key: string, attachmentId: string | UploadRef): unknown {
  if (isRef(value)) return value.$upload === key ? attachmentId : value
  if (Array.isArray(value)) return value.map((v) => resolve(v, key, attachmentId))
  if (typeof value === 'object' && value !== null)
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v, key, attachmentId)]))
  return value
}
