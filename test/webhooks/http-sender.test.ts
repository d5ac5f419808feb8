import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { createAgentPool, sendWebhook, type AgentPool } from '../../src/webhooks/http-sender.js'
import { gate, startReceiver, statuses, type Receiver } from './receiver.js'

describe('sending one webhook attempt', () => {
  const receivers: Receiver[] = []
  let pool: AgentPool | undefined
  afterEach(async () => {
    pool?.destroy()
    pool = undefined
    await Promise.all(receivers.splice(0).map((r) => r.close()))
  })
  async function receiver(...args: Parameters<typeof startReceiver>) {
    const r = await startReceiver(...args)
    receivers.push(r)
    return r
  }
  const post = (url: string, extra: Partial<Parameters<typeof sendWebhook>[0]> = {}) =>
    sendWebhook({ url, headers: { 'webhook-id': 'evt_1' }, body: '{"id":"evt_1"}', allowPrivate: true, ...extra })

  it('POSTs the body as JSON with our user agent; a 2xx is a success', async () => {
    const r = await receiver(statuses(204))
    const result = await post(`${r.url}/hooks?x=1`)
    expect(result).toMatchObject({ success: true, status: 204, error: null, retryAfterMs: null })
    const [req] = r.requests
    expect(req).toMatchObject({ method: 'POST', url: '/hooks?x=1', body: '{"id":"evt_1"}' })
    expect(req!.headers).toMatchObject({
      'content-type': 'application/json',
      'user-agent': 'rxtrace-webhooks/1',
      'webhook-id': 'evt_1',
      'content-length': '14',
    })
  })

  it('our content-type and user-agent win over caller headers', async () => {
    const r = await receiver()
    await post(r.url, { headers: { 'Content-Type': 'text/plain', 'user-agent': 'x' } })
    expect(r.requests[0]!.headers['content-type']).toBe('application/json')
    expect(r.requests[0]!.headers['user-agent']).toBe('rxtrace-webhooks/1')
  })

  it('a 5xx or 4xx is a failure with its status', async () => {
    const r = await receiver(statuses(500, 400))
    expect(await post(r.url)).toMatchObject({ success: false, status: 500, error: null })
    expect(await post(r.url)).toMatchObject({ success: false, status: 400, error: null })
  })

  it('never follows a redirect: a 3xx is a failure', async () => {
    const target = await receiver()
    const r = await receiver(statuses([302, { location: `${target.url}/elsewhere` }]))
    // Had it followed the redirect, the attempt would have waited for the target's answer.
    expect(await post(r.url)).toMatchObject({ success: false, status: 302, error: 'redirect not followed' })
    expect(target.requests).toHaveLength(0)
  })

  it('gives up after the timeout, even if the receiver would answer 200 later', async () => {
    const answer = gate() // opened once the attempt has given up
    const r = await receiver(async (_req, res) => {
      await answer.opened
      res.end('late')
    })
    const result = await post(r.url, { timeoutMs: 200 })
    answer.open()
    expect(result).toMatchObject({ success: false, status: null, error: 'timeout after 200 ms' })
    expect(result.durationMs).toBeGreaterThanOrEqual(195)
  })

  it('a receiver that sends headers but trickles its body is still a success', async () => {
    const r = await receiver((_req, res) => {
      res.writeHead(200)
      res.write('partial') // never ends
    })
    // The deadline covers the answer's headers, which come at once; the body never ends.
    const result = await post(r.url, { timeoutMs: 5_000 })
    expect(result).toMatchObject({ success: true, status: 200 })
  })

  it('reads Retry-After on 429 and 503 only', async () => {
    const r = await receiver(
      statuses(
        [429, { 'retry-after': '7' }],
        [503, { 'retry-after': new Date(Date.now() + 60_000).toUTCString() }],
        [500, { 'retry-after': '7' }],
      ),
    )
    expect(await post(r.url)).toMatchObject({ status: 429, retryAfterMs: 7_000 })
    const unavailable = await post(r.url)
    expect(unavailable.retryAfterMs).toBeGreaterThan(55_000)
    expect(unavailable.retryAfterMs).toBeLessThanOrEqual(60_000)
    expect(await post(r.url)).toMatchObject({ status: 500, retryAfterMs: null })
  })

  it('drains a large response without storing it', async () => {
    const r = await receiver((_req, res) => {
      res.end('x'.repeat(1024 * 1024))
    })
    expect(await post(r.url)).toMatchObject({ success: true, status: 200 })
  })

  it('reports connection failures and bad URLs instead of throwing', async () => {
    const r = await receiver()
    const closedUrl = r.url
    await r.close()
    receivers.length = 0
    expect(await post(closedUrl)).toMatchObject({ success: false, status: null, error: expect.stringMatching(/^ECONNREFUSED/) })
    expect(await post('not a url')).toMatchObject({ success: false, status: null, error: 'invalid URL' })
  })

  it('reuses keep-alive connections from the pool', async () => {
    pool = createAgentPool()
    const r = await receiver()
    for (let i = 0; i < 20; i++) expect((await post(r.url, { agentFactory: pool.agentFor })).success).toBe(true)
    await Promise.all(Array.from({ length: 5 }, () => post(r.url, { agentFactory: pool!.agentFor })))
    expect(r.requests).toHaveLength(25)
    expect(r.connections).toBeLessThanOrEqual(5)
  })

  it('retries once on a fresh connection when a reused keep-alive socket turns out dead', async () => {
    pool = createAgentPool({ idleSocketMs: 60_000 })
    // A raw receiver that answers the first request on each connection and hangs up on the
    // second, as a server does when its idle timeout races our reuse of the socket.
    let connections = 0
    let answered = 0
    const sockets: Socket[] = []
    const server = createNetServer((socket) => {
      sockets.push(socket)
      connections++
      let requestsOnSocket = 0
      socket.on('data', (chunk) => {
        if (!chunk.toString().includes('\r\n\r\n')) return
        if (++requestsOnSocket > 1) return void socket.destroy()
        answered++
        socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: keep-alive\r\n\r\nok')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
    try {
      expect((await post(url, { agentFactory: pool.agentFor })).success).toBe(true)
      expect(await post(url, { agentFactory: pool.agentFor })).toMatchObject({ success: true, status: 200 })
      expect({ connections, answered }).toEqual({ connections: 2, answered: 2 })
    } finally {
      for (const socket of sockets) socket.destroy()
      await new Promise((resolve) => server.close(resolve))
    }
  })

  it('an abort signal ends the attempt at once', async () => {
    const controller = new AbortController()
    const answer = gate() // opened once the attempt has ended: only the abort can end it
    const r = await receiver(async (_req, res) => {
      controller.abort() // the request has arrived: abort while the receiver still holds it
      await answer.opened
      res.end()
    })
    const result = await post(r.url, { signal: controller.signal })
    answer.open()
    expect(r.requests).toHaveLength(1)
    expect(result).toMatchObject({ success: false, status: null, error: 'aborted' })
  })
})
