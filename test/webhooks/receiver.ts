import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceivedRequest {
  method: string
  url: string
  headers: IncomingMessage['headers']
  body: string
  at: number
}

export type Reply = (req: ReceivedRequest, res: ServerResponse, index: number) => void | Promise<void>

export interface Receiver {
  url: string
  requests: ReceivedRequest[]
  /** TCP connections accepted so far (keep-alive reuse shows as fewer connections than requests). */
  connections: number
  close(): Promise<void>
}

/** A real HTTP receiver on 127.0.0.1:0; `reply` decides each response (default 200 "ok"). */
export async function startReceiver(
  reply: Reply = (_req, res) => {
    res.end('ok')
  },
): Promise<Receiver> {
  const requests: ReceivedRequest[] = []
  const receiver = { url: '', requests, connections: 0, close: async () => {} }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      const received = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        at: Date.now(),
      }
      requests.push(received)
      void Promise.resolve(reply(received, res, requests.length - 1)).catch(() => res.destroy())
    })
  })
  server.on('connection', () => receiver.connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  receiver.url = `http://127.0.0.1:${port}`
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections()
      server.close(() => resolve())
    })
  return receiver
}

/** Replies with the given statuses in turn, then the last one forever. */
export function statuses(...codes: Array<number | [number, Record<string, string>]>): Reply {
  return (_req, res, index) => {
    const entry = codes[Math.min(index, codes.length - 1)]!
    const [status, headers] = Array.isArray(entry) ? entry : [entry, {}]
    res.writeHead(status, headers).end()
  }
}

/**
 * A receiver taking its time before it answers: the scenario under test (a slow or hung
 * endpoint), never a test waiting for something. Unref'd so a 30 s answer does not hold a
 * finished test file open.
 */
export const slowAnswer = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms).unref())

/** A promise the test resolves itself: a receiver that answers exactly when the test says so. */
export function gate(): { opened: Promise<void>; open: () => void } {
  let open!: () => void
  const opened = new Promise<void>((resolve) => (open = resolve))
  return { opened, open }
}

/** Polls `check` until it returns true or `timeoutMs` passes. */
export async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((resolve) => setTimeout(resolve, 5)) // the poll interval
  }
}
