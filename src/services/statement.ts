import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import { MAX_FIELD_ERRORS, type FieldError } from '../errors.js'

/** The formats an operator's statement comes in (docs/fleet.md, Checking a statement). */
export type StatementFormat = 'jsonl' | 'csv'

/** `errors`: the first MAX_FIELD_ERRORS bad lines; `badLines`: how many there are in all. */
export type ParsedStatement = { ok: true; payouts: Map<string, number> } | { ok: false; errors: FieldError[]; badLines: number }

const DELIVERY_ID = /^[\w-]{1,64}$/
// Parsing yields to the event loop after this long, so a 4 MiB statement of two million bad lines
// (each JSON.parse that throws costs tens of µs) never holds the service for longer at a time.
const TURN_MS = 10
// How often (in lines) the clock is read to see whether the turn is over.
const LINES_PER_CLOCK_READ = 256

/**
 * Reads a statement: JSON lines (`{"delivery_id": "dl_…", "payout_cents": 1234}` per line) or
 * CSV with a header row naming `delivery_id` and `payout_cents` (other columns are ignored, so
 * our own reconciliation CSV is a valid statement). Blank lines are skipped. Bad lines are
 * reported as `/lines/<n>` (1-based line number of the body), the first MAX_FIELD_ERRORS of them
 * with the count of all; one bad line refuses the whole. Read line by line, yielding to the event
 * loop every TURN_MS, and without an array of every line.
 */
export async function parseStatement(text: string, format: StatementFormat): Promise<ParsedStatement> {
  const errors: FieldError[] = []
  let badLines = 0
  const payouts = new Map<string, number>()
  const firstLine = new Map<string, number>()
  const bad = (n: number, message: string) => {
    badLines++
    if (errors.length < MAX_FIELD_ERRORS) errors.push({ pointer: `/lines/${n}`, message })
  }
  let columns: { id: number; payout: number } | null = null
  const readLine = (raw: string, n: number) => {
    if (raw.trim() === '') return
    let entry: { delivery_id: unknown; payout_cents: unknown }
    if (format === 'csv') {
      const cells = raw.split(',').map(unquote)
      if (!columns) {
        const id = cells.indexOf('delivery_id')
        const payout = cells.indexOf('payout_cents')
        if (id < 0 || payout < 0) return void bad(n, 'the header row must name the columns delivery_id and payout_cents')
        columns = { id, payout }
        return
      }
      const payoutText = cells[columns.payout] ?? ''
      entry = { delivery_id: cells[columns.id], payout_cents: /^-?\d{1,15}$/.test(payoutText) ? Number(payoutText) : payoutText }
    } else {
      // A line that cannot be an object is refused without JSON.parse, whose exceptions are slow.
      const line = raw.trim()
      if (line.charCodeAt(0) !== 123 /* { */ || line.charCodeAt(line.length - 1) !== 125 /* } */) return void bad(n, 'is not a JSON object')
      try {
        const value: unknown = JSON.parse(line)
        if (typeof value !== 'object' || value === null || Array.isArray(value)) return void bad(n, 'is not a JSON object')
        entry = value as typeof entry
      } catch {
        return void bad(n, 'is not valid JSON')
      }
    }
    const { delivery_id, payout_cents } = entry
    if (typeof delivery_id !== 'string' || !DELIVERY_ID.test(delivery_id)) return void bad(n, 'delivery_id must be a delivery id')
    if (typeof payout_cents !== 'number' || !Number.isSafeInteger(payout_cents))
      return void bad(n, 'payout_cents must be an integer number of minor units')
    const seen = firstLine.get(delivery_id)
    if (seen !== undefined) return void bad(n, `${delivery_id} is already on line ${seen}`)
    firstLine.set(delivery_id, n)
    payouts.set(delivery_id, payout_cents)
  }
  let start = 0
  let turnStarted = performance.now()
  for (let n = 1; start <= text.length; n++) {
    const newline = text.indexOf('\n', start)
    const end = newline === -1 ? text.length : newline
    readLine(text.slice(start, end > start && text.charCodeAt(end - 1) === 13 /* \r */ ? end - 1 : end), n)
    start = end + 1
    if (n % LINES_PER_CLOCK_READ === 0 && performance.now() - turnStarted >= TURN_MS) {
      await yieldToEventLoop()
      turnStarted = performance.now()
    }
  }
  if (format === 'csv' && !columns && badLines === 0) bad(1, 'the header row must name the columns delivery_id and payout_cents')
  return badLines ? { ok: false, errors, badLines } : { ok: true, payouts }
}

// RFC 4180: a field may be quoted; a quote inside is doubled.
const unquote = (cell: string) => {
  const trimmed = cell.trim()
  return trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"') ? trimmed.slice(1, -1).replace(/""/g, '"') : trimmed
}
