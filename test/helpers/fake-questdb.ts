import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * Just enough of QuestDB's HTTP server: /settings, ILP `POST /write`, and /exec for DDL,
 * `wal_tables()` and `SELECT count()`. Like a WAL table, a write is acknowledged when committed
 * and shows in reads `applyLagMs` later; like a DEDUP UPSERT KEYS(ts, tote_id) table, a row
 * written again replaces the first (`rows`). `answerDelayMs` stands for QuestDB's commit latency,
 * `refuseFor()` for a QuestDB that is down for a while and comes back on the same address.
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
  /** How long a write waits before its 204 (QuestDB's WAL commit). */
  answerDelayMs = 0
  /** Writes being answered right now, and the most there ever were at once. */
  writesInFlight = 0
  maxWritesInFlight = 0
  /** The table as DEDUP UPSERT KEYS(ts, tote_id) keeps it: `tote_id ts_ns` → the line stored last. */
  rows = new Map<string, string>()
  private port = 0

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(this.port, '127.0.0.1', resolve))
    this.port = (this.server.address() as AddressInfo).port
    return `127.0.0.1:${this.port}`
  }

  /** Down for `ms` (connections refused, requests in progress cut), then up again on the same port. */
  async refuseFor(ms: number): Promise<void> {
    await this.stop()
    await new Promise((resolve) => setTimeout(resolve, ms))
    this.server = createServer((req, res) => void this.handle(req, res))
    await this.start()
  }

  /** Whether the table holds the reading of `toteId` at `tsMs`. */
  has(toteId: string, tsMs: number): boolean {
    return this.rows.has(`${toteId} ${BigInt(tsMs) * 1_000_000n}`)
  }

  /** Closes the port: from now on a connection is refused, as by a QuestDB that is down. */
  async stop(): Promise<void> {
    const closed = new Promise((resolve) => this.server.close(resolve))
    this.server.closeAllConnections()
    await closed
  }

  /**
   * The queries of the sink's retention (questdb-sink.ts, expireDays), over the stored rows:
   * `min(cast(ts AS LONG))` with an optional `ts <` bound and `delivery_id IN (…)`, a `count()`
   * below a `ts`, and `DROP PARTITION WHERE ts <` (whole days, as QuestDB's day partitions).
   */
  private retention(query: string): { columns: []; dataset: unknown[][] } | { ddl: string } | null {
    const below = /ts < cast\((\d+) AS TIMESTAMP\)/.exec(query)
    const limit = below ? Number(below[1]) : Infinity
    const ids = /delivery_id IN \(([^)]*)\)/
      .exec(query)?.[1]
      ?.split(',')
      .map((id) => id.trim().slice(1, -1))
    const facts = [...this.rows.entries()].map(([key, line]) => ({ key, ...lineFacts(line) }))
    const matching = facts.filter((f) => f.tsMicros < limit && (!ids || (f.delivery !== null && ids.includes(f.delivery))))
    if (/^\s*SELECT min\(cast\(ts AS LONG\)\)/i.test(query))
      return { columns: [], dataset: [[matching.length ? Math.min(...matching.map((f) => f.tsMicros)) : null]] }
    if (below && /^\s*SELECT count\(\)/i.test(query)) return { columns: [], dataset: [[matching.length]] }
    if (/DROP PARTITION WHERE/i.test(query)) {
      const day = 86_400_000_000
      if (limit % day !== 0) throw new Error('the fake drops whole days only, as QuestDB drops day partitions')
      for (const f of matching) this.rows.delete(f.key)
      this.stored = this.stored.filter((line) => lineFacts(line).tsMicros >= limit)
      this.appliedLines = this.stored.length
      return { ddl: 'OK' }
    }
    return null
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
      const retention = this.retention(query)
      if (retention) return json(200, retention)
      if (/^\s*SELECT count\(\)/i.test(query))
        return json(200, { columns: [], dataset: [[this.applyLagMs === 0 ? this.rows.size : this.appliedLines]] })
      return json(200, { ddl: 'OK' })
    }
    if (url.pathname === '/write' && req.method === 'POST') {
      this.writeRequests++
      if (this.failNext > 0 || Date.now() < this.failUntil) {
        this.failNext = Math.max(0, this.failNext - 1)
        return json(this.failStatus, { code: 'internal error', message: 'simulated failure', line: 1, errorId: 'x' })
      }
      this.writesInFlight++
      this.maxWritesInFlight = Math.max(this.maxWritesInFlight, this.writesInFlight)
      try {
        if (this.answerDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.answerDelayMs))
      } finally {
        this.writesInFlight--
      }
      if (res.destroyed) return // cut by stop(): nothing committed
      const written = Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean)
      this.stored.push(...written)
      for (const line of written) this.rows.set(dedupKey(line), line)
      const [txn, lines] = [++this.sequencerTxn, this.stored.length]
      const apply = () => Object.assign(this, { writerTxn: txn, appliedLines: lines })
      if (this.applyLagMs === 0) apply()
      else setTimeout(apply, this.applyLagMs)
      return res.writeHead(204).end()
    }
    json(404, { error: 'not found' })
  }
}

/** A stored line's `ts` in µs, and its delivery (null: unbound). */
function lineFacts(line: string): { tsMicros: number; delivery: string | null } {
  return {
    tsMicros: Number(BigInt(line.slice(line.lastIndexOf(' ') + 1)) / 1_000n),
    delivery: /(?:^|,)delivery_id=([^, ]+)/.exec(line)?.[1] ?? null,
  }
}

/** `readings,tote_id=tt_1,... temp_c=5,... 1735689600000000000` → `tt_1 1735689600000000000`. */
function dedupKey(line: string): string {
  const tote = /(?:^|,)tote_id=([^, ]+)/.exec(line)?.[1] ?? ''
  return `${tote} ${line.slice(line.lastIndexOf(' ') + 1)}`
}
