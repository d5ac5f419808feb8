import { createParser, type EventSourceMessage } from 'eventsource-parser'
import type { components } from './schema.js'
import type { TokenSource } from './tokens.js'

export type FeedEvent = components['schemas']['Event']

export interface ExceptionFeedOptions {
  /** Resume after this event id (`evt_…`), e.g. the last one you stored before a restart. */
  lastEventId?: string
  /** Only these types (`cold-chain.break`, `handoff.refused`, …). */
  types?: string[]
  /** Stops the subscription; the iterator then ends without an error. */
  signal?: AbortSignal
  /** Wait before reconnecting when the server has not said (its `retry:` field wins); doubles up to `maxRetryMs`. */
  retryMs?: number
  maxRetryMs?: number
  /** Told each time a connection is accepted (the feed sends what happens from then on, or after `lastEventId`). */
  onOpen?: () => void
  /** Told of every reconnect, with the error that ended the connection (for logs and metrics). */
  onReconnect?: (info: { attempt: number; lastEventId: string | undefined; error: unknown }) => void
}

export class FeedError extends Error {
  constructor(
    readonly status: number,
    readonly problem: unknown,
  ) {
    super(`exception feed refused: ${status} ${(problem as { code?: string } | null)?.code ?? ''}`.trim())
    this.name = 'FeedError'
  }
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })

/**
 * A fleet's exception feed (`GET /v1/fleets/{id}/exceptions/stream`, Server-Sent Events) as an
 * async iterator. When a connection ends or fails it reconnects after the server's `retry:` delay,
 * with a fresh token and `Last-Event-ID` set to the last event it yielded, so the server resumes
 * right after it: no gap and no duplicate. 401 renews the token; 400, 403 and 404 end the iterator
 * with a FeedError (retrying would not help); heartbeat comments only keep the connection alive.
 */
export async function* subscribeExceptions(
  options: ExceptionFeedOptions & { baseUrl: string; fleetId: string; tokens: TokenSource; fetch?: typeof fetch | undefined },
): AsyncGenerator<FeedEvent> {
  const doFetch = options.fetch ?? globalThis.fetch.bind(globalThis)
  const baseRetry = options.retryMs ?? 2_000
  const maxRetry = options.maxRetryMs ?? 30_000
  let lastEventId = options.lastEventId
  let serverRetry: number | undefined
  let failures = 0
  const stop = new AbortController()
  const onAbort = () => stop.abort()
  options.signal?.addEventListener('abort', onAbort, { once: true })
  try {
    while (!stop.signal.aborted) {
      let error: unknown
      try {
        const url = new URL(`/v1/fleets/${encodeURIComponent(options.fleetId)}/exceptions/stream`, options.baseUrl)
        if (options.types?.length) url.searchParams.set('type', options.types.join(','))
        const token = await options.tokens.token()
        const res = await doFetch(url, {
          headers: {
            accept: 'text/event-stream',
            authorization: `Bearer ${token}`,
            ...(lastEventId ? { 'last-event-id': lastEventId } : {}),
          },
          signal: stop.signal,
        })
        if (res.status === 401) options.tokens.invalidate(token)
        if ([400, 403, 404].includes(res.status)) throw new FeedError(res.status, await res.json().catch(() => null))
        if (!res.ok || !res.body) throw new Error(`exception feed answered ${res.status}`)
        failures = 0
        options.onOpen?.()
        for await (const message of messages(res.body, (ms) => {
          serverRetry = ms
        })) {
          if (!message.data) continue
          const event = JSON.parse(message.data) as FeedEvent
          lastEventId = message.id ?? event.id
          yield event
        }
        error = new Error('the server ended the stream')
      } catch (e) {
        if (e instanceof FeedError) throw e
        if (stop.signal.aborted) return
        error = e
      }
      failures++
      options.onReconnect?.({ attempt: failures, lastEventId, error })
      // The server's delay after a connection that worked; doubled for each failure in a row since.
      await sleep(Math.min((serverRetry ?? baseRetry) * 2 ** Math.min(failures - 1, 4), maxRetry), stop.signal)
    }
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
    stop.abort() // the consumer broke out of its loop: close the connection
  }
}

/** The stream's messages, parsed by the WHATWG EventSource rules (eventsource-parser). */
async function* messages(body: ReadableStream<Uint8Array>, onRetry: (ms: number) => void): AsyncGenerator<EventSourceMessage> {
  const queue: EventSourceMessage[] = []
  const parser = createParser({ onEvent: (message) => queue.push(message), onRetry })
  const decoder = new TextDecoder()
  const reader = body.getReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      parser.feed(decoder.decode(value, { stream: true }))
      while (queue.length) yield queue.shift()!
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
}
