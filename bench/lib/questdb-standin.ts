/**
 * A stand-in for QuestDB's HTTP endpoints for `npm run bench:ingest -- --sink questdb-standin`:
 * ILP `POST /write` answered 204 after `delayMs` (QuestDB's WAL commit as seen by a client), /exec
 * answering DDL, `wal_tables()` (always applied) and `SELECT count()`, /settings. It keeps the
 * table as DEDUP UPSERT KEYS(ts, tote_id) would: one row per (tote_id, ts). Run as its own
 * process (`node --import tsx bench/lib/questdb-standin.ts <delayMs>`): it prints its port on
 * stdout, and its CPU is not the service's.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

const delayMs = Number(process.argv[2] ?? 20)
const keys = new Set<string>()
let requests = 0

async function handle(req: IncomingMessage, res: ServerResponse) {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const url = new URL(req.url ?? '/', 'http://x')
  const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
  // ILP text (protocol 1) only, so every line can be read back to check the count: the client
  // then sends text, which costs the service a little more CPU than QuestDB 9's binary doubles.
  if (url.pathname === '/settings') return json(200, { config: { 'line.proto.support.versions': [1] } })
  if (url.pathname === '/exec') {
    const query = url.searchParams.get('query') ?? ''
    if (query.includes('wal_tables()')) return json(200, { columns: [], dataset: [[requests, requests, false]] })
    if (/^\s*SELECT count\(\)/i.test(query)) return json(200, { columns: [], dataset: [[keys.size]] })
    return json(200, { ddl: 'OK' })
  }
  if (url.pathname === '/write' && req.method === 'POST') {
    await new Promise((resolve) => setTimeout(resolve, delayMs))
    const body = Buffer.concat(chunks).toString('utf8')
    for (const line of body.split('\n')) {
      if (!line) continue
      const tote = /(?:^|,)tote_id=([^, ]+)/.exec(line)?.[1] ?? ''
      keys.add(`${tote} ${line.slice(line.lastIndexOf(' ') + 1)}`)
    }
    requests++
    return res.writeHead(204).end()
  }
  json(404, { error: 'not found' })
}

const server = createServer((req, res) => void handle(req, res))
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`))
process.on('message', (m: { type: string }) => {
  if (m.type === 'count') process.send?.({ type: 'count', rows: keys.size, requests })
  if (m.type === 'stop') server.close(() => process.exit(0))
})
process.on('disconnect', () => process.exit(0))
