import type { ApiClient } from './api-client.js'
import type { SimulatedTote } from './tote.js'

/**
 * The one status line a simulation keeps updated on stderr (`\r`), and the service's events it
 * has seen, polled from `GET /v1/events` (commit order, resumable with `after`).
 */

export type EventEnvelope = { id: string; type: string; delivery_id?: string | null; created_at: string; data: Record<string, unknown> }

export class EventWatcher {
  private after: string | null = null
  readonly counts = new Map<string, number>()
  total = 0

  constructor(
    private readonly api: ApiClient,
    private readonly deliveryIds: ReadonlySet<string>,
  ) {}

  /** Fetches what is new; only events of this simulation's deliveries count. */
  async poll(): Promise<EventEnvelope[]> {
    const seen: EventEnvelope[] = []
    for (;;) {
      const page = await this.api.get<{ data: EventEnvelope[] }>(`/v1/events?limit=100${this.after ? `&after=${this.after}` : ''}`)
      for (const event of page.data) {
        this.after = event.id
        if (!event.delivery_id || !this.deliveryIds.has(event.delivery_id)) continue
        seen.push(event)
        this.total++
        this.counts.set(event.type, (this.counts.get(event.type) ?? 0) + 1)
      }
      if (page.data.length < 100) return seen
    }
  }
}

export function progressLine(totes: readonly SimulatedTote[], failures: number, events: EventWatcher): string {
  const sum = (key: 'sent' | 'acked' | 'rejected') => totes.reduce((n, t) => n + t.stats[key], 0)
  const connected = totes.filter((t) => t.stats.connected).length
  const breaks = events.counts.get('cold-chain.break') ?? 0
  const excursions = events.counts.get('temperature.excursion') ?? 0
  return `totes ${connected}/${totes.length} connected · readings ${sum('sent')} sent, ${sum('acked')} acked · errors ${sum('rejected') + failures} · events ${events.total} (${excursions} excursions, ${breaks} breaks)`
}

// Without a terminal, a progress line every 10 s says it is alive without flooding a log.
const PLAIN_REDRAW_MS = 10_000

/**
 * Rewrites the status line in place on a terminal; `log` prints a line above it. Elsewhere (a
 * file, a pipe, CI) each status is a line of its own, progress redraws at most every 10 s.
 */
export class StatusLine {
  private last = ''
  private lastPlainAt = 0
  constructor(
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly now: () => number = Date.now,
  ) {}

  update(text: string, { redraw = false }: { redraw?: boolean } = {}): void {
    this.last = text
    if (this.stream.isTTY) return void this.stream.write(`\r\x1b[2K${text}`)
    if (redraw && this.now() - this.lastPlainAt < PLAIN_REDRAW_MS) return
    this.lastPlainAt = this.now()
    this.stream.write(`${text}\n`)
  }

  log(line: string): void {
    if (this.stream.isTTY) this.stream.write(`\r\x1b[2K${line}\n${this.last}`)
    else this.stream.write(`${line}\n`)
  }

  end(): void {
    this.stream.write(this.stream.isTTY ? `\r\x1b[2K${this.last}\n` : `${this.last}\n`)
  }
}
