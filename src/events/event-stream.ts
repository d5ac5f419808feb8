import type { Logger } from 'pino'
import { AppError } from '../errors.js'
import type { EventFeed, EventScope, Position } from './event-cursor.js'
import type { EventEnvelope } from './outbox.js'
import { frameOf } from './sse-frames.js'
import { Subscription, type StreamHost, type StreamRequest } from './stream-subscription.js'

/** Settings of the live event streams (docs/api.md, Event streams; docs/operations.md for the variables). */
export type StreamSettings = {
  /** How often the tail reads the store when nothing woke it (events committed by other copies of the service). */
  pollMs: number
  /** A `: heartbeat` comment on every stream this often. */
  heartbeatMs: number
  /** Bytes a stream may have waiting for its reader; past that the stream is ended. */
  bufferBytes: number
  /** Streams one tenant (a pharmacy, a fleet, or the unrestricted clients together) may hold open at once. */
  maxPerTenant: number
}

export type StreamStats = { subscribers: number; cutOff: number; largestBacklogBytes: number; tailReads: number }

// The tail reads the whole feed this many events at a time; a catching-up stream its own scope.
const TAIL_PAGE = 500
const CATCH_UP_PAGE = 100
// Streams handed a page per turn of the event loop.
const FANOUT_CHUNK = 50

/**
 * The live event streams of one process. One tail loop reads the feed (the gap-free event
 * cursor, without a tenant) after the last event it saw, and hands each event to every stream
 * whose scope holds it; it reads when the outbox reports a local commit (`wake`) and every
 * `pollMs` otherwise, so events another copy of the service committed arrive too. However many
 * streams are open, that is one query per wake-up or poll; a stream reads the store itself only
 * while it catches up from its `Last-Event-ID`.
 *
 * No gap, no duplicate: a stream registers with the tail first, then reads its own backlog from
 * the store until a read comes back short; events the tail hands it meanwhile wait, and are
 * passed on only when they stand after the last event it sent (positions in the feed's order,
 * which never changes: an event is listed only once nothing can commit before it).
 *
 * Backpressure: a stream's bytes wait in its own queue until the HTTP response takes them
 * (the Node adapter reads the body only as the socket drains). A queue past `bufferBytes` ends
 * the stream and closes its connection; the reader reconnects with Last-Event-ID and catches up
 * from the store. A catching-up stream whose waiting live events pass the bound drops them and
 * reads the store once more instead. Memory per stream is bounded either way.
 */
export class EventStreams implements StreamHost {
  private readonly subscribers = new Set<Subscription>()
  private readonly perTenant = new Map<string, number>()
  private cursor: string | null = null
  private position: Position | null = null
  private ready: Promise<void> | null = null
  private running: Promise<void> | null = null
  private wakeRequested = false
  private sleeping: { timer: NodeJS.Timeout; resolve: () => void } | null = null
  private heartbeat: NodeJS.Timeout | null = null
  private closed = false
  private readonly counters = { cutOff: 0, largestBacklogBytes: 0, tailReads: 0 }

  constructor(
    private readonly feed: EventFeed,
    private readonly settings: StreamSettings,
    private readonly logger?: Logger,
  ) {}

  /** A transaction that wrote events committed in this process: read the feed now. */
  wake(): void {
    if (!this.ready) return
    this.wakeRequested = true
    const sleeping = this.sleeping
    if (sleeping) {
      this.sleeping = null
      clearTimeout(sleeping.timer)
      sleeping.resolve()
    }
  }

  stats(): StreamStats {
    return { subscribers: this.subscribers.size, ...this.counters }
  }

  /**
   * Opens a stream: the SSE bytes as a ReadableStream that produces only as fast as it is read.
   * Refused with 429 past the tenant's limit, 503 once the service is stopping.
   */
  async open(request: StreamRequest): Promise<ReadableStream<Uint8Array>> {
    if (this.closed) throw new AppError('not_ready', 'The service is stopping; reconnect with Last-Event-ID.', {}, { 'Retry-After': '2' })
    const open = this.perTenant.get(request.tenant) ?? 0
    if (open >= this.settings.maxPerTenant) {
      throw new AppError(
        'rate_limited',
        `This tenant already has ${open} event streams open, the most allowed; close one first.`,
        { limit: this.settings.maxPerTenant },
        { 'Retry-After': '5' },
      )
    }
    this.perTenant.set(request.tenant, open + 1)
    let subscription: Subscription | null = null
    try {
      const start = request.after === null ? null : await this.feed.position(request.after)
      subscription = new Subscription(this, request, request.after, start)
      // Registered before the tail's position is taken: events the tail hands over meanwhile
      // wait, and those at or before where the stream starts are never sent.
      this.subscribers.add(subscription)
      await this.ensureRunning()
      if (request.after === null) subscription.startAt(this.cursor, this.position)
    } catch (error) {
      if (subscription) this.subscribers.delete(subscription)
      this.release(request.tenant)
      throw error
    }
    if (this.closed) {
      this.subscribers.delete(subscription)
      this.release(request.tenant)
      throw new AppError('not_ready', 'The service is stopping; reconnect with Last-Event-ID.', {}, { 'Retry-After': '2' })
    }
    return subscription.body()
  }

  /** Ends every stream cleanly (what is queued is still sent) and stops the tail; new streams are refused. */
  async close(): Promise<void> {
    this.closed = true
    for (const subscription of [...this.subscribers]) subscription.end()
    this.wake()
    await this.running
  }

  /** @internal */ readPage(cursor: string | null, scope: EventScope) {
    return this.feed.readPositioned(cursor, CATCH_UP_PAGE, scope)
  }

  /** @internal */ get bufferBytes() {
    return this.settings.bufferBytes
  }

  /** @internal */ noteBacklog(bytes: number) {
    if (bytes > this.counters.largestBacklogBytes) this.counters.largestBacklogBytes = bytes
  }

  /** @internal A stream is over (ended, cancelled by its reader, or cut off). */
  remove(subscription: Subscription, cutOff: boolean): void {
    if (!this.subscribers.delete(subscription)) return
    if (cutOff) this.counters.cutOff += 1
    this.release(subscription.tenant)
  }

  private release(tenant: string) {
    const left = (this.perTenant.get(tenant) ?? 1) - 1
    if (left > 0) this.perTenant.set(tenant, left)
    else this.perTenant.delete(tenant)
  }

  /** Starts the tail when it is not running: it begins at the feed's head. Resolves once the tail has a position. */
  private ensureRunning(): Promise<void> {
    if (this.ready) return this.ready
    const ready = this.feed.head().then((head) => {
      this.cursor = head.cursor
      this.position = head.position
    })
    this.ready = ready
    ready.then(
      () => {
        this.heartbeat = setInterval(() => {
          for (const subscription of [...this.subscribers]) subscription.heartbeat()
        }, this.settings.heartbeatMs)
        this.heartbeat.unref()
        this.running = this.loop()
      },
      () => {
        this.ready = null
      },
    )
    return ready
  }

  /** Reads the feed while any stream is open; stops (and forgets its position) when the last one ends. */
  private async loop(): Promise<void> {
    while (!this.closed && this.subscribers.size > 0) {
      this.wakeRequested = false
      try {
        await this.readAll()
      } catch (err) {
        this.logger?.warn({ err }, 'reading the event feed for the live streams failed; retrying')
      }
      if (this.wakeRequested || this.closed || this.subscribers.size === 0) continue
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.sleeping = null
          resolve()
        }, this.settings.pollMs)
        timer.unref()
        this.sleeping = { timer, resolve }
      })
    }
    if (this.heartbeat) clearInterval(this.heartbeat)
    this.heartbeat = null
    this.ready = null
    this.running = null
  }

  /**
   * Reads what is new and hands it to the streams, FANOUT_CHUNK streams per turn of the event
   * loop: with a thousand streams open, writing one event to all of them in one go kept the loop
   * (and the PUBACKs waiting on it) for tens of milliseconds. A stream that opens meanwhile is
   * not handed this page: it starts before it and reads it from the store.
   */
  private async readAll(): Promise<void> {
    for (;;) {
      // A driver's stream that opens during this read catches up from the store, which filters by driver itself.
      const withDriver = [...this.subscribers].some((s) => s.needsDriver)
      const page = await this.feed.readPositioned(this.cursor, TAIL_PAGE, {}, { withDriver })
      this.counters.tailReads += 1
      if (page.events.length) {
        const framed = page.events.map((item) => {
          const frames = new Map<(event: EventEnvelope) => EventEnvelope, Buffer>()
          const frame = (project: (event: EventEnvelope) => EventEnvelope) => {
            let bytes = frames.get(project)
            if (!bytes) frames.set(project, (bytes = frameOf(project(item.event))))
            return bytes
          }
          return { item, frame }
        })
        const subscribers = [...this.subscribers]
        for (let i = 0; i < subscribers.length; i += FANOUT_CHUNK) {
          if (i > 0) await new Promise((resolve) => setImmediate(resolve))
          for (const subscription of subscribers.slice(i, i + FANOUT_CHUNK)) {
            for (const { item, frame } of framed) subscription.offer(item, frame)
          }
        }
        const last = page.events.at(-1)!
        this.cursor = last.cursor
        this.position = last.position
      }
      if (!page.more || this.subscribers.size === 0) return
    }
  }
}
