/**
 * Webhook receivers for `npm run bench:webhooks`, run as a child process (`fork`) so their CPU
 * is not the service's. Starts `count` keep-alive HTTP servers on 127.0.0.1, each answering
 * 204 at once, and tells the parent their URLs. For every request it keeps the commit→receipt
 * lag (receipt time − the envelope's `created_at`, stamped inside the committing transaction;
 * both clocks are this machine's `Date.now()`), and it verifies one signature in
 * `VERIFY_EVERY` with `standardwebhooks`, so a broken signer shows up as errors.
 *
 * Protocol (IPC): child → `{ type: 'ready', urls }`; parent → `{ type: 'secrets', secrets }`
 * (one per receiver, in order), `{ type: 'count' }` → `{ type: 'count', distinct }`, and
 * `{ type: 'report', reset? }` → `{ type: 'report', report }`; `reset` starts a new measurement.
 */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

// Verifying costs about as much as signing; one in 50 keeps the receivers light.
const VERIFY_EVERY = 50

export type ReceiverReport = {
  requests: number
  /** Distinct (endpoint, webhook-id) pairs: deliveries, with at-least-once duplicates removed. */
  distinct: number
  duplicates: number
  signature_failures: number
  /** Wall-clock ms of the first and last request. */
  first_at: number | null
  last_at: number | null
  /** Commit→receipt in ms, sorted ascending. */
  lags_ms: number[]
  /** Per wall-clock second since `first_at`: deliveries received and the worst lag among them. */
  timeline: Array<{ second: number; received: number; max_lag_ms: number }>
}

export type ReceiverRequest = { type: 'secrets'; secrets: string[] } | { type: 'count' } | { type: 'report'; reset?: boolean }
export type ReceiverMessage =
  { type: 'ready'; urls: string[] } | { type: 'count'; distinct: number } | { type: 'report'; report: ReceiverReport }

function createTally() {
  return {
    requests: 0,
    seen: new Set<string>(),
    duplicates: 0,
    signatureFailures: 0,
    firstAt: null as number | null,
    lastAt: 0,
    lags: [] as number[],
    timeline: [] as Array<{ second: number; received: number; max_lag_ms: number }>,
  }
}

async function main(): Promise<void> {
  const count = Number(process.argv[2] ?? 10)
  let secrets: string[] = []
  let tally = createTally()
  const servers: Server[] = []
  for (let index = 0; index < count; index++) {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => {
        const at = Date.now()
        res.writeHead(204).end()
        const body = Buffer.concat(chunks).toString()
        const id = String(req.headers['webhook-id'])
        tally.requests++
        tally.firstAt ??= at
        tally.lastAt = at
        const key = `${index}:${id}`
        if (tally.seen.has(key)) {
          tally.duplicates++
          return
        }
        tally.seen.add(key)
        const envelope = JSON.parse(body) as { created_at: string }
        const lag = at - Date.parse(envelope.created_at)
        tally.lags.push(lag)
        const second = Math.floor((at - tally.firstAt) / 1_000)
        const slot = (tally.timeline[second] ??= { second, received: 0, max_lag_ms: 0 })
        slot.received++
        slot.max_lag_ms = Math.max(slot.max_lag_ms, lag)
        const secret = secrets[index]
        if (secret && tally.requests % VERIFY_EVERY === 0) {
          try {
            new Webhook(secret).verify(body, req.headers as Record<string, string>)
          } catch {
            tally.signatureFailures++
          }
        }
      })
    })
    server.keepAliveTimeout = 5_000
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    servers.push(server)
  }
  const urls = servers.map((server) => `http://127.0.0.1:${(server.address() as AddressInfo).port}`)
  process.on('message', (message: ReceiverRequest) => {
    if (message.type === 'secrets') {
      secrets = message.secrets
      return
    }
    if (message.type === 'count') {
      process.send!({ type: 'count', distinct: tally.seen.size } satisfies ReceiverMessage)
      return
    }
    const report: ReceiverReport = {
      requests: tally.requests,
      distinct: tally.seen.size,
      duplicates: tally.duplicates,
      signature_failures: tally.signatureFailures,
      first_at: tally.firstAt,
      last_at: tally.firstAt === null ? null : tally.lastAt,
      lags_ms: tally.lags.sort((a, b) => a - b),
      timeline: Array.from(tally.timeline, (slot, second) => slot ?? { second, received: 0, max_lag_ms: 0 }),
    }
    if (message.reset) tally = createTally()
    process.send!({ type: 'report', report } satisfies ReceiverMessage)
  })
  process.on('disconnect', () => {
    for (const server of servers) server.close()
    process.exit(0)
  })
  process.send!({ type: 'ready', urls } satisfies ReceiverMessage)
}

void main()
