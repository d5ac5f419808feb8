import type { TemperatureTrace } from './trace.js'

/** The media type of the CSV trace; `header=present` per RFC 4180 §3. */
export const CSV_MEDIA_TYPE = 'text/csv; charset=utf-8; header=present'

const HEADER = ['t', 'min_c', 'max_c', 'avg_c', 'n']

/**
 * The trace's points as RFC 4180 CSV: a header line, one record per point, CRLF line breaks
 * (§2.1–2.3). Every value is a timestamp or a number, so none needs quoting; `field` quotes
 * anyway should one ever contain a comma, a quote or a line break (§2.6–2.7).
 */
export function traceCsv(trace: TemperatureTrace): string {
  const records = [HEADER, ...trace.points.map((p) => [p.t, p.min, p.max, p.avg, p.n])]
  return records.map((record) => record.map(field).join(',')).join('\r\n') + '\r\n'
}

function field(value: string | number): string {
  const text = String(value)
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text
}
