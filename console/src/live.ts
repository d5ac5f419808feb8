import { accessToken } from './auth'
import type { EventEnvelope, Page } from './api'

// Live updates: the tenant's event stream `GET /v1/events/stream` (Server-Sent Events) read with
// fetch, because EventSource cannot send the Authorization header. Frames are `id: evt_…`,
// `event: <type>`, `data: <envelope JSON>`; `: heartbeat` comments keep it open; a reconnect
// sends `Last-Event-ID` so nothing is missed. A service without the stream (404) is polled
// instead: `GET /v1/events?after=<last id>` every second.

type Listener = (event: EventEnvelope) => void
const listeners = new Set<Listener>()
let lastId: string | null = null
let started = false
let mode: 'stream' | 'polling' | 'connecting' = 'connecting'
/** How the page follows events, shown on <html data-live> (what the browser tests check). */
function setMode(next: typeof mode) {
  mode = next
  document.documentElement.dataset.live = next
}

export function onEvent(listener: Listener): () => void {
  listeners.add(listener)
  if (!started) {
    started = true
    void run()
  }
  return () => listeners.delete(listener)
}

const POLL_MS = 1_000
const RETRY_MS = 2_000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function emit(event: EventEnvelope) {
  lastId = event.id
  for (const listener of listeners) listener(event)
}

async function run(): Promise<void> {
  for (;;) {
    try {
      const headers: Record<string, string> = { authorization: `Bearer ${await accessToken()}`, accept: 'text/event-stream' }
      if (lastId) headers['last-event-id'] = lastId
      const res = await fetch('/v1/events/stream', { headers, cache: 'no-store' })
      if (res.status === 404 || res.status === 405) return poll()
      if (!res.ok || !res.body) throw new Error(`stream ${res.status}`)
      setMode('stream')
      await readFrames(res.body)
    } catch {
      /* dropped: reconnect with Last-Event-ID */
    }
    setMode('connecting')
    await sleep(RETRY_MS)
  }
}

/** The SSE wire format (HTML Living Standard §9.2.6): fields per line, a blank line ends an event. */
async function readFrames(body: ReadableStream<Uint8Array>, deliver: (e: EventEnvelope) => void = emit): Promise<void> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ''
  let data: string[] = []
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += decoder.decode(value, { stream: true })
    let nl: number
    while ((nl = buffer.search(/\r\n|\n|\r/)) >= 0) {
      const line = buffer.slice(0, nl)
      buffer = buffer.slice(nl + (buffer.startsWith('\r\n', nl) ? 2 : 1))
      if (line === '') {
        if (data.length) {
          try {
            deliver(JSON.parse(data.join('\n')) as EventEnvelope)
          } catch {
            /* not an envelope: ignore */
          }
        }
        data = []
      } else if (line.startsWith('data:')) {
        data.push(line.slice(5).replace(/^ /, ''))
      } // `id:`, `event:` and `: comments` (heartbeats) need nothing more: the envelope carries its id and type
    }
  }
}

async function page(query: string): Promise<Page<EventEnvelope>> {
  const res = await fetch(`/v1/events?${query}`, { headers: { authorization: `Bearer ${await accessToken()}` }, cache: 'no-store' })
  if (!res.ok) throw new Error(`events ${res.status}`)
  return (await res.json()) as Page<EventEnvelope>
}

async function poll(): Promise<void> {
  setMode('polling')
  // Where the feed ends now: later events are the news.
  if (!lastId) {
    let cursor: string | null = null
    for (;;) {
      const p: Page<EventEnvelope> = await page(new URLSearchParams({ limit: '100', ...(cursor ? { cursor } : {}) }).toString())
      if (p.data.length) lastId = p.data.at(-1)!.id
      if (!p.next_cursor) break
      cursor = p.next_cursor
    }
  }
  for (;;) {
    await sleep(POLL_MS)
    try {
      for (;;) {
        const p = await page(new URLSearchParams({ limit: '100', ...(lastId ? { after: lastId } : {}) }).toString())
        for (const event of p.data) emit(event)
        if (!p.next_cursor || !p.data.length) break
      }
    } catch {
      /* try again next second */
    }
  }
}
