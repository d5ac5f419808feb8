import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * Just enough of QuestDB's HTTP server: /settings, ILP `POST /write`, and /exec for DDL,
 * `wal_tables()` and `SELECT count()`. Like a WAL table, a write is acknowledged when committed
 * and shows in reads `applyLagMs` later.
 */
export class FakeQuestdb {
  server: Server = createServer((req, res) => void this.handle(req, res))
  /** Answer the next N writes with this status instead of 204. */
  failNext = 0
  failStatus = 500
  /** Answer every write with an error until this time (epoch ms). */
  failUntil = 0
  writeRequests = 0
  /** ILP lines of the writes that were answered 204. */
  stored: string[] = []
  applyLagMs = 0
  sequencerTxn = 0
  writerTxn = 0
  /** Lines a read sees: those of the transactions applied so far. */
  appliedLines = 0

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve))
    return `127.0.0.1:${(this.server.address() as AddressInfo).port}`
  }

  /** Closes the port: from now on a connection is refused, as by a QuestDB that is down. */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve))
    this.server.closeAllConnections()
    await closed
  }

  private async handle(req: IncomingMessage, res: ServerResponse) {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const url = new URL(req.url ?? '/', 'http://x')
    const json = (status: number, body: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body))
    if (url.pathname === '/settings') return json(200, { config: { 'line.proto.support.versions': [1, 2] } })
    if (url.pathname === '/exec') {
      const query = url.searchParams.get('query') ?? ''
      if (query.includes('wal_tables()')) return json(200, { columns: [], dataset: [[this.writerTxn, this.sequencerTxn, false]] })
      if (/^\s*SELECT count\(\)/i.test(query)) return json(200, { columns: [], dataset: [[this.appliedLines]] })
      return json(200, { ddl: 'OK' })
    }
    if (url.pathname === '/write' && req.method === 'POST') {
      this.writeRequests++
      if (this.failNext > 0 || Date.now() < this.failUntil) {
        this.failNext = Math.max(0, this.failNext - 1)
        return json(this.failStatus, { code: 'internal error', message: 'simulated failure', line: 1, errorId: 'x' })
      }
      this.stored.push(...Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean))
      const [txn, lines] = [++this.sequencerTxn, this.stored.length]
      const apply = () => Object.assign(this, { writerTxn: txn, appliedLines: lines })
      if (this.applyLagMs === 0) apply()
      else setTimeout(apply, this.applyLagMs)
      return res.writeHead(204).end()
    }
    json(404, { error: 'not found' })
  }
}
