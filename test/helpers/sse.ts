/** One Server-Sent Events frame as a reader sees it. */
export type SseFrame = { id?: string; event?: string; data?: string; retry?: number; comment?: string }

/**
 * A Server-Sent Events reader over fetch (what a browser that must send `Authorization` uses
 * instead of EventSource): frames parsed as they arrive (WHATWG HTML, "Parsing an event stream").
 */
export async function openSse(url: string, token: string, headers: Record<string, string> = {}) {
  const controller = new AbortController()
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}`, ...headers }, signal: controller.signal })
  const errorText = res.ok ? '' : await res.text()
  const frames: SseFrame[] = []
  const waiters = new Set<() => void>()
  let ended: 'done' | 'error' | null = null
  let text = ''
  let raw = ''
  const notify = () => {
    for (const waiter of [...waiters]) waiter()
  }

  const pump = (async () => {
    if (!res.ok || !res.body) {
      text = errorText
      ended = 'done'
      return
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader()
    let buffer = ''
    try {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        raw += value
        buffer += value
        let end: number
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const frame: SseFrame = {}
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) frame.comment = line.slice(1).trim()
            else {
              const colon = line.indexOf(':')
              const field = line.slice(0, colon)
              const value = line.slice(colon + 1).replace(/^ /, '')
              if (field === 'id') frame.id = value
              else if (field === 'event') frame.event = value
              else if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`
              else if (field === 'retry') frame.retry = Number(value)
            }
          }
          frames.push(frame)
        }
        notify()
      }
      ended = 'done'
    } catch {
      ended = 'error'
    }
    notify()
  })()

  const events = () => frames.filter((f) => f.data !== undefined).map((f) => ({ id: f.id!, event: f.event!, data: JSON.parse(f.data!) }))

  return {
    status: res.status,
    headers: res.headers,
    /** The answer's text when it was not a stream (an error). */
    get text() {
      return text
    },
    /** Everything received, as it came. */
    get raw() {
      return raw
    },
    frames,
    events,
    get ended() {
      return ended
    },
    /** Waits until `check` holds over what arrived; fails after `timeoutMs` (a bound on failure, not a timing assertion). */
    async until(check: () => boolean, what = 'stream condition', timeoutMs = 10_000): Promise<void> {
      if (check()) return
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter)
          reject(new Error(`timed out waiting for ${what}; received ${JSON.stringify(frames.slice(-5))}`))
        }, timeoutMs)
        const waiter = () => {
          if (!check() && ended === null) return
          clearTimeout(timer)
          waiters.delete(waiter)
          if (check()) resolve()
          else reject(new Error(`stream ended (${ended}) before ${what}`))
        }
        waiters.add(waiter)
      })
    },
    /** Waits for `n` events in all. */
    untilEvents(n: number, what = `${n} events`) {
      return this.until(() => events().length >= n, what)
    },
    /** Waits for the server to end the stream. */
    untilEnded() {
      return new Promise<'done' | 'error'>((resolve) => {
        if (ended) return resolve(ended)
        const waiter = () => {
          if (ended) {
            waiters.delete(waiter)
            resolve(ended)
          }
        }
        waiters.add(waiter)
      })
    },
    close() {
      controller.abort()
      return pump
    },
  }
}

export type SseStream = Awaited<ReturnType<typeof openSse>>
