import type { FieldError } from '../errors.js'

/** The formats an operator's statement comes in (docs/fleet.md, Checking a statement). */
export type StatementFormat = 'jsonl' | 'csv'

export type ParsedStatement = { ok: true; payouts: Map<string, number> } | { ok: false; errors: FieldError[] }

const DELIVERY_ID = /^[\w-]{1,64}$/

/**
 * Reads a statement: JSON lines (`{"delivery_id": "dl_…", "payout_cents": 1234}` per line) or
 * CSV with a header row naming `delivery_id` and `payout_cents` (other columns are ignored, so
 * our own reconciliation CSV is a valid statement). Blank lines are skipped. Every bad line is
 * reported as `/lines/<n>` (1-based line number of the body); one bad line refuses the whole.
 */
export function parseStatement(text: string, format: StatementFormat): ParsedStatement {
  const lines = text.split(/\r?\n/)
  const errors: FieldError[] = []
  const payouts = new Map<string, number>()
  const firstLine = new Map<string, number>()
  const bad = (n: number, message: string) => errors.push({ pointer: `/lines/${n}`, message })
  let columns: { id: number; payout: number } | null = null
  lines.forEach((raw, index) => {
    const n = index + 1
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
      try {
        const value: unknown = JSON.parse(raw)
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
  })
  if (format === 'csv' && !columns && errors.length === 0)
    errors.push({ pointer: '/lines/1', message: 'the header row must name the columns delivery_id and payout_cents' })
  return errors.length ? { ok: false, errors } : { ok: true, payouts }
}

// RFC 4180: a field may be quoted; a quote inside is doubled.
const unquote = (cell: string) => {
  const trimmed = cell.trim()
  return trimmed.length >= 2 && trimmed.startsWith('"') && trimmed.endsWith('"') ? trimmed.slice(1, -1).replace(/""/g, '"') : trimmed
}
