import { comparePositions, inScope, type EventScope, type Position, type PositionedEvent } from './event-cursor.js'
import type { EventEnvelope } from './outbox.js'
import { frameOf, HEARTBEAT, RETRY } from './sse-frames.js'

/** What one stream shows and where it starts. */
export type StreamRequest = {
  /** Who the stream counts against in `maxPerTenant`. */
  tenant: string
  /** The events it shows: the tenant's visibility and the request's filters. */
  scope: EventScope
  /** The cursor just after the last event the reader has (Last-Event-ID); null: from now on. */
  after: string | null
  /** How an event is shown (the exception feed cuts `data` to an allowlist); the envelope as it is otherwise. */
  project?: (event: EventEnvelope) => EventEnvelope
  /** Checked at every heartbeat: once false (the token was revoked), the stream ends cleanly. */
  stillValid?: () => boolean
  /** The stream ends cleanly this many ms from now (the token's expiry): the reader reconnects with a fresh token. */
  endsInMs?: number
  /** Called when the reader fell too far behind and the stream was ended: close the connection. */
  onCutOff?: () => void
  /**
   * The Node response the stream's bytes end up in, when there is one (the HTTP server; not
   * `app.request()`). Once the reader is waiting for more, live frames are written to it
   * directly instead of through the ReadableStream, several promise hops fewer per frame.
   */
  sink?: DirectSink
}

/** What a stream needs of a Node `ServerResponse` to write to it directly. */
type DirectSink = {
  readonly headersSent: boolean
  readonly writableLength: number
  readonly destroyed: boolean
  write(chunk: Uint8Array): boolean
}

/** What a stream needs of the streams that hold it: its backlog from the store, the bound, the books. */
export type StreamHost = {
  readPage(cursor: string | null, scope: EventScope): Promise<{ events: PositionedEvent[]; cursor: string | null; more: boolean }>
  readonly bufferBytes: number
  noteBacklog(bytes: number): void
  /** A stream is over (ended, cancelled by its reader, or cut off). */
  remove(subscription: Subscription, cutOff: boolean): void
}

const identity = (event: EventEnvelope) => event

/** One open stream. Its reader pulls; the tail and the heartbeat push. */
export class Subscription {
  readonly tenant: string
  private readonly scope: EventScope
  private readonly project: (event: EventEnvelope) => EventEnvelope
  private queue: Buffer[] = [RETRY]
  private queued = RETRY.length
  private catchingUp = true
  /** Live events handed over while catching up, and how many times they had to be dropped. */
  private waiting: Array<{ position: Position; bytes: Buffer }> = []
  private waitingBytes = 0
  private dropped = 0
  private state: 'open' | 'ending' | 'over' = 'open'
  private wakeReader: (() => void) | null = null
  private endTimer: NodeJS.Timeout | null = null
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null

  constructor(
    private readonly streams: StreamHost,
    private readonly request: StreamRequest,
    /** Where the backlog read continues. */
    private cursor: string | null,
    /** The last event this stream sent (or stands after): nothing at or before it is sent again. */
    private last: Position | null,
  ) {
    this.tenant = request.tenant
    this.scope = request.scope
    this.project = request.project ?? identity
    if (request.endsInMs !== undefined) {
      this.endTimer = setTimeout(() => this.end(), Math.min(Math.max(0, request.endsInMs), 2 ** 31 - 1))
      this.endTimer.unref()
    }
  }

  /** A driver's stream: the tail must read which driver each event's delivery is assigned to. */
  get needsDriver(): boolean {
    return !!this.scope.driverId
  }

  /** A stream from now on starts where the tail stands. */
  startAt(cursor: string | null, position: Position | null): void {
    this.cursor = cursor
    this.last = position
  }

  body(): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.controller = controller
        },
        pull: (controller) => this.pull(controller),
        cancel: () => this.finish(false),
      },
      { highWaterMark: 0 },
    )
  }

  /** From the tail: an event of the feed, with its frame as this stream shows it. */
  offer(item: PositionedEvent, frame: (project: (event: EventEnvelope) => EventEnvelope) => Buffer): void {
    if (this.state !== 'open' || !inScope(item, this.scope)) return
    if (this.catchingUp) {
      const bytes = frame(this.project)
      this.waiting.push({ position: item.position, bytes })
      this.waitingBytes += bytes.length
      if (this.waitingBytes > this.streams.bufferBytes) {
        // The backlog read will find them in the store: drop them, and read once more.
        this.waiting = []
        this.waitingBytes = 0
        this.dropped += 1
      }
      return
    }
    if (this.last && comparePositions(item.position, this.last) <= 0) return
    this.last = item.position
    this.push(frame(this.project))
  }

  /** Every heartbeat: a comment line, or the end when the token that opened the stream no longer holds. */
  heartbeat(): void {
    if (this.request.stillValid && !this.request.stillValid()) this.end()
    else this.push(HEARTBEAT)
  }

  /** Queues bytes for the reader; past the bound the stream is cut off. */
  push(bytes: Buffer): void {
    if (this.state === 'over') return
    const sink = this.request.sink
    // The adapter is waiting for the body's next chunk, so everything before these bytes is in
    // the response already: they can follow it directly. The response's own buffer is then the
    // backlog, and the same bound holds for it.
    if (sink && this.wakeReader && this.queue.length === 0 && sink.headersSent && !sink.destroyed) {
      sink.write(bytes)
      this.streams.noteBacklog(sink.writableLength)
      if (sink.writableLength > this.streams.bufferBytes) this.cutOff()
      return
    }
    this.queue.push(bytes)
    this.queued += bytes.length
    this.streams.noteBacklog(this.queued)
    if (this.queued > this.streams.bufferBytes && this.queue.length > 1) return this.cutOff()
    this.wake()
  }

  /** Ends the stream cleanly: what is queued is sent, then the response ends. */
  end(): void {
    if (this.state !== 'open') return
    this.state = 'ending'
    this.wake()
  }

  private wake() {
    const wake = this.wakeReader
    this.wakeReader = null
    wake?.()
  }

  private async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    for (;;) {
      if (this.state === 'over') return
      if (this.queue.length) {
        const chunk = this.queue.length === 1 ? this.queue[0]! : Buffer.concat(this.queue, this.queued)
        this.queue = []
        this.queued = 0
        controller.enqueue(chunk)
        return
      }
      if (this.state === 'ending') {
        this.finish(false)
        controller.close()
        return
      }
      if (this.catchingUp) {
        await this.catchUp()
        continue
      }
      await new Promise<void>((resolve) => (this.wakeReader = resolve))
    }
  }

  /** One page of this stream's backlog from the store; past its end, the waiting live events. */
  private async catchUp(): Promise<void> {
    const dropped = this.dropped
    let page
    try {
      page = await this.streams.readPage(this.cursor, this.scope)
    } catch (error) {
      // The stream fails; the reader reconnects with Last-Event-ID and tries again.
      this.finish(false)
      throw error
    }
    for (const item of page.events) this.send(item.position, frameOf(this.project(item.event)))
    this.cursor = page.cursor
    if (page.more || dropped !== this.dropped) return
    this.catchingUp = false
    const waiting = this.waiting
    this.waiting = []
    this.waitingBytes = 0
    for (const { position, bytes } of waiting) this.send(position, bytes)
  }

  private send(position: Position, bytes: Buffer) {
    if (this.last && comparePositions(position, this.last) <= 0) return
    this.last = position
    this.queue.push(bytes)
    this.queued += bytes.length
    this.streams.noteBacklog(this.queued)
  }

  private cutOff() {
    this.finish(true)
    this.queue = []
    this.queued = 0
    // Closing the connection cancels the body; served in-process, the body fails instead.
    if (this.request.onCutOff) this.request.onCutOff()
    else this.controller?.error(new Error('the reader fell too far behind'))
  }

  private finish(cutOff: boolean) {
    if (this.state === 'over') return
    this.state = 'over'
    if (this.endTimer) clearTimeout(this.endTimer)
    this.waiting = []
    this.streams.remove(this, cutOff)
    this.wake()
  }
}
