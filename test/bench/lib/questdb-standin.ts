/**
 * A stand-in for QuestDB's HTTP endpoints for `npm run bench:ingest -- --sink questdb-standin`:
 * ILP `POST /write` answered 204 after `delayMs` (QuestDB's WAL commit as seen by a client), /exec
 * answering DDL, `wal_tables()` (always applied) and `SELECT count()`, /settings. It keeps the
 * table as DEDUP UPSERT KEYS(ts, tote_id) would: one row per (tote_id, ts). Run as its own
 * process (`node --import tsx test/bench/lib/questdb-standin.ts <delayMs>`): it prints its port on
 * stdout, and its CPU is not the service's.
 *
 * It must not be what limits the bench: it shares the machine's cores with the service, so a
 * write costs it as little as it can. A body is read as bytes, never as one string: each line's
 * tote and timestamp are found with Buffer searches, and the table is a set of timestamps per
 * tote (numbers, not a string per row). `bench:ingest` reports its CPU per reading next to the
 * service's.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

const delayMs = Number(process.argv[2] ?? 20)
if (!Number.isFinite(delayMs) || delayMs < 0) throw new Error(`the answer delay must be a number of ms >= 0, got ${process.argv[2]}`)

/** tote_id → the designated timestamps stored for it, in ms (the sink writes ms followed by `000000` ns). */
const table = new Map<string, Set<number>>()
let rows = 0
let requests = 0

const NEWLINE = 0x0a
const SPACE = 0x20
const COMMA = 0x2c
const TOTE = Buffer.from(',tote_id=')

/** Stores each line of an ILP body (protocol 1 text) under its (tote_id, ts). */
function store(body: Buffer): void {
  for (let start = 0; start < body.length;) {
    let end = body.indexOf(NEWLINE, start)
    if (end === -1) end = body.length
    const toteAt = body.indexOf(TOTE, start)
    if (toteAt !== -1 && toteAt < end) {
      const from = toteAt + TOTE.length
      let to = from
      while (to < end && body[to] !== COMMA && body[to] !== SPACE) to++
      const tote = body.toString('latin1', from, to)
      // The designated timestamp closes the line: its digits before the last six (ns → ms).
      let ms = 0
      for (let i = body.lastIndexOf(SPACE, end) + 1; i < end - 6; i++) ms = ms * 10 + (body[i]! - 0x30)
      let stamps = table.get(tote)
      if (stamps === undefined) table.set(tote, (stamps = new Set()))
      if (!stamps.has(ms)) (stamps.add(ms), rows++)
    }
    start = end + 1
  }
}

async function handle(req: IncomingMessage, res: ServerResponse) {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const url = new URL(req.url ?? '/', 'http://x')
  const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  // ILP text (protocol 1) only, as the sink writes it (questdb-ilp.ts), so every line can be counted.
  if (url.pathname === '/settings') return json(200, { config: { 'line.proto.support.versions': [1] } })
  if (url.pathname === '/exec') {
    const query = url.searchParams.get('query') ?? ''
    if (query.includes('wal_tables()')) return json(200, { columns: [], dataset: [[requests, requests, false]] })
    if (/^\s*SELECT count\(\)/i.test(query)) return json(200, { columns: [], dataset: [[rows]] })
    return json(200, { ddl: 'OK' })
  }
  if (url.pathname === '/write' && req.method === 'POST') {
    await new Promise((resolve) => setTimeout(resolve, delayMs))
    store(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks))
    requests++
    return res.writeHead(204).end()
  }
  json(404, { error: 'not found' })
}

const server = createServer((req, res) => void handle(req, res))
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`))
process.on('message', (m: { type: string }) => {
  if (m.type === 'count') process.send?.({ type: 'count', rows, requests })
  if (m.type === 'stop') server.close(() => process.exit(0))
})
process.on('disconnect', () => process.exit(0))
