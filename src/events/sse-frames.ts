import type { EventEnvelope } from './outbox.js'

/** The first line of every stream: the browser's EventSource reconnects after 2 s. */
export const RETRY = Buffer.from('retry: 2000\n\n')
export const HEARTBEAT = Buffer.from(': heartbeat\n\n')

/** One SSE frame: `id`, `event` and `data` lines (JSON has no raw line breaks), then a blank line. */
export function frameOf(event: EventEnvelope): Buffer {
  return Buffer.from(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
}
