import type { SenderOptions } from '@questdb/nodejs-client'
import type { ReadingRow } from './sink.js'

/**
 * Readings as InfluxDB line protocol text (QuestDB ILP, protocol version 1) and its POST to
 * QuestDB's `/write` (ILP over HTTP: 204 once committed to the table's WAL).
 *
 * Why not the official client's Sender: it encodes row by row through a dozen calls, each
 * validating names and writing to its buffer, an `await` per row; measured, ~40 µs of CPU per
 * reading, most of the sink's cost (a reading's whole ingest on SQLite costs less). A group's text
 * is built here in one pass (~2 µs a reading) and kept for every retry of it. The client still
 * parses the config string (SenderOptions), so host, port, TLS and credentials mean the same as
 * for /exec (questdb-exec.ts).
 *
 * Line: `table,tote_id=…[,delivery_id=…,rx_id=…] temp_c=…,[battery=…,…,seq=…i,]received_at=…t,late=t|f <ts ns>`
 * (symbols first, then columns; a null is an absent column).
 */

/** ILP escaping of a symbol value, as the official client does it: a backslash before a comma, equals sign, space, line break or backslash. */
const escapeSymbol = (value: string) => (/[,= \n\r\\]/.test(value) ? value.replace(/[,= \n\r\\]/g, '\\$&') : value)

/** A double in ILP text: JavaScript's shortest round-trip form (readings are finite numbers). */
const double = (x: number) => (Number.isInteger(x) ? `${x}.0` : String(x))

export function ilpLines(table: string, rows: readonly ReadingRow[]): string {
  let text = ''
  for (const r of rows) {
    let line = `${table},tote_id=${escapeSymbol(r.tote_id)}`
    if (r.delivery_id !== null) line += `,delivery_id=${escapeSymbol(r.delivery_id)}`
    if (r.rx_id !== null) line += `,rx_id=${escapeSymbol(r.rx_id)}`
    line += ` temp_c=${double(r.temp_c)}`
    if (r.battery !== null) line += `,battery=${double(r.battery)}`
    if (r.humidity !== null) line += `,humidity=${double(r.humidity)}`
    if (r.lat !== null) line += `,lat=${double(r.lat)}`
    if (r.lng !== null) line += `,lng=${double(r.lng)}`
    if (r.seq !== null) line += `,seq=${Math.trunc(r.seq)}i`
    // `t`: a timestamp column in microseconds; the designated timestamp at the end is in ns.
    line += `,received_at=${Math.trunc(r.received_at) * 1000}t,late=${r.late ? 't' : 'f'} ${Math.trunc(r.ts)}000000\n`
    text += line
  }
  return text
}

export type IlpPost = (body: string, timeoutMs: number) => Promise<void>

/**
 * One request per call. A non-204 answer rejects with `statusCode=<n>` in its message (what
 * questdb-sink.ts's isRetriable reads); no answer (refused, reset, timed out) rejects without one.
 */
export function createIlpPost(options: SenderOptions): IlpPost {
  const url = `${options.protocol}://${options.host}:${options.port ?? 9000}/write?precision=n`
  const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  else if (options.username !== undefined && options.password !== undefined) {
    headers.authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`
  }
  return async (body, timeoutMs) => {
    const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(Math.max(1, timeoutMs)) })
    if (res.status === 204 || res.status === 200) return void (await res.arrayBuffer().catch(() => undefined))
    const detail = await res.text().catch(() => '')
    throw new Error(`QuestDB /write answered statusCode=${res.status}: ${detail.slice(0, 300)}`)
  }
}
