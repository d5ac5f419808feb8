import http from 'node:http'
import https from 'node:https'
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

export type IlpPost = ((body: string, timeoutMs: number) => Promise<void>) & { close(): void }

/**
 * One request per call, on connections of its own (`connections` keep-alive sockets): the
 * writes never queue behind the reads that /exec sends over fetch's shared pool (a thousand
 * deliveries loading their state at once held them past their deadline). A non-204 answer
 * rejects with `statusCode=<n>` in its message (what questdb-sink.ts's isRetriable reads); no
 * answer (refused, reset, timed out) rejects without one.
 */
export function createIlpPost(options: SenderOptions, connections: number): IlpPost {
  const tls = options.protocol === 'https'
  const agent = tls
    ? new https.Agent({ keepAlive: true, maxSockets: connections })
    : new http.Agent({ keepAlive: true, maxSockets: connections })
  const headers: Record<string, string> = { 'content-type': 'text/plain; charset=utf-8' }
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`
  else if (options.username !== undefined && options.password !== undefined) {
    headers.authorization = `Basic ${Buffer.from(`${options.username}:${options.password}`).toString('base64')}`
  }
  const target = { host: options.host, port: options.port ?? 9000, path: '/write?precision=n', method: 'POST', agent }
  const post = (body: string, timeoutMs: number) =>
    new Promise<void>((resolve, reject) => {
      const payload = Buffer.from(body, 'utf8')
      const req = (tls ? https : http).request({ ...target, headers: { ...headers, 'content-length': String(payload.length) } }, (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          clearTimeout(timer)
          if (res.statusCode === 204 || res.statusCode === 200) resolve()
          else
            reject(
              new Error(`QuestDB /write answered statusCode=${res.statusCode}: ${Buffer.concat(chunks).toString('utf8').slice(0, 300)}`),
            )
        })
        res.on('error', reject)
      })
      const timer = setTimeout(() => req.destroy(new Error(`no answer from QuestDB within ${timeoutMs} ms`)), Math.max(1, timeoutMs))
      req.on('error', (error) => {
        clearTimeout(timer)
        reject(error)
      })
      req.end(payload)
    })
  return Object.assign(post, { close: () => agent.destroy() })
}
