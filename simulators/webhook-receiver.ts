import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { Webhook } from 'standardwebhooks'

/**
 * A local webhook receiver: verifies each delivery's Standard Webhooks signature
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`, SPEC §7) with the `standardwebhooks`
 * package and prints every verified event on one line. Unverifiable requests get 401 and a
 * line saying so. Run alone:
 *
 *   npx tsx simulators/webhook-receiver.ts --secret whsec_… [--port 9090]   (or WEBHOOK_SECRET=…)
 */

export type WebhookEvent = {
  id: string
  type: string
  created_at: string
  delivery_id?: string | null
  seq?: number | null
  data: Record<string, unknown>
}

export type WebhookReceiver = {
  url: string
  /** The secret can arrive after the receiver started (the endpoint is registered pointing at it). */
  setSecret(secret: string): void
  close(): Promise<void>
}

// Standard Webhooks bodies are small JSON envelopes; anything larger is not ours.
const MAX_BODY_BYTES = 1 << 20

export async function startWebhookReceiver(opts: {
  port?: number
  host?: string
  secret?: string
  onEvent: (event: WebhookEvent) => void
  onRejected?: (reason: string) => void
}): Promise<WebhookReceiver> {
  let verifier = opts.secret ? new Webhook(opts.secret) : null
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    let size = 0
    req.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > MAX_BODY_BYTES) req.destroy()
      else chunks.push(chunk)
    })
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      if (!verifier) return void res.writeHead(503).end('no secret yet')
      try {
        const event = verifier.verify(body, headersOf(req.headers)) as WebhookEvent
        res.writeHead(204).end()
        opts.onEvent(event)
      } catch (error) {
        res.writeHead(401).end('signature verification failed')
        opts.onRejected?.(`${req.headers['webhook-id'] ?? 'request'}: ${(error as Error).message}`)
      }
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', resolve)
  })
  const { address, port } = server.address() as AddressInfo
  return {
    url: `http://${address}:${port}/webhooks`,
    setSecret: (secret) => void (verifier = new Webhook(secret)),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

function headersOf(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(', ') : (v ?? '')]))
}

/** `12:03:04  cold-chain.break  dl_…  reason=excursion_too_long`: the event's type, delivery and salient data. */
export function eventLine(event: WebhookEvent, { time = true } = {}): string {
  const d = event.data
  const details = [
    d.reason && `reason=${d.reason}`,
    d.status && `status=${d.status}`,
    d.peak_c != null && `peak=${d.peak_c}°C`,
    d.decision && `decision=${d.decision}`,
    d.from && d.to && `${d.from}→${d.to}`,
  ]
    .filter(Boolean)
    .join(' ')
  return `${time ? `${event.created_at.slice(11, 19)}  ` : ''}${event.type.padEnd(24)} ${event.delivery_id ?? ''}  ${details}`.trimEnd()
}

async function main(): Promise<void> {
  let values: { secret?: string; port?: string; host?: string }
  try {
    ;({ values } = parseArgs({
      options: { secret: { type: 'string' }, port: { type: 'string', default: '9090' }, host: { type: 'string', default: '127.0.0.1' } },
    }))
  } catch (error) {
    return usage((error as Error).message)
  }
  const secret = values.secret ?? process.env.WEBHOOK_SECRET
  if (!secret) return usage('no secret: pass --secret whsec_… or set WEBHOOK_SECRET')
  const port = Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65_535) return usage(`--port must be a port number, got ${values.port}`)
  const receiver = await startWebhookReceiver({
    port,
    host: values.host!,
    secret,
    onEvent: (event) => console.log(eventLine(event)),
    onRejected: (reason) => console.log(`✗ rejected ${reason}`),
  })
  console.error(`listening on ${receiver.url} — register it with POST /v1/webhooks {"url": "${receiver.url}", "events": ["*"]}`)
  const stop = () => void receiver.close().then(() => process.exit(0))
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}

function usage(problem: string): void {
  console.error(`webhook-receiver: ${problem}`)
  process.exit(2)
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) main().catch((error: Error) => usage(error.message))
