import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createRxtraceClient, FeedError, staticToken, subscribeExceptions, type FeedEvent, type TokenSource } from '@rxtrace/sdk'
import { ADMIN, documents, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

const envelope = (n: number): FeedEvent => ({
  id: `evt_${String(n).padStart(4, '0')}`,
  type: n % 2 ? 'cold-chain.break' : 'handoff.refused',
  created_at: '2026-11-23T10:00:00Z',
  api_version: 'v1',
  pharmacy_id: 'ph_1',
  fleet_id: 'fl_1',
  delivery_id: 'dl_1',
  rx_id: 'rx_1',
  seq: n,
  data: { reason: 'hard_limit' },
})

/**
 * A server speaking the feed's framing (`retry:`, then `id:`/`event:`/`data:` per event, `: heartbeat`
 * comments, resume after `Last-Event-ID`), which cuts every connection after two events: the SDK's
 * reconnect and resume are seen from the wire.
 */
async function feedServer(events: FeedEvent[], refuse?: (req: IncomingMessage) => number | undefined) {
  const connections: { lastEventId: string | undefined; authorization: string | undefined; url: string }[] = []
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const lastEventId = req.headers['last-event-id'] as string | undefined
    connections.push({ lastEventId, authorization: req.headers.authorization, url: req.url ?? '' })
    const status = refuse?.(req)
    if (status) {
      res
        .writeHead(status, { 'content-type': 'application/problem+json' })
        .end(JSON.stringify({ status, code: status === 401 ? 'unauthorized' : 'not_found' }))
      return
    }
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store' })
    res.write('retry: 5\n\n: heartbeat\n\n')
    const from = lastEventId ? events.findIndex((e) => e.id === lastEventId) + 1 : 0
    for (const event of events.slice(from, from + 2)) res.write(`id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`)
    // A dropped connection, mid-stream, once what was written has left.
    res.write(': heartbeat\n\n', () => {
      if (from + 2 < events.length) res.destroy()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

describe('the exception feed subscription', () => {
  let server: Awaited<ReturnType<typeof feedServer>> | undefined
  afterEach(async () => {
    await server?.close()
    server = undefined
  })

  it('reconnects after a dropped connection and resumes after the last event: no gap, no duplicate', async () => {
    const events = Array.from({ length: 7 }, (_, i) => envelope(i + 1))
    server = await feedServer(events)
    const received: FeedEvent[] = []
    const reconnects: (string | undefined)[] = []
    for await (const event of subscribeExceptions({
      baseUrl: server.baseUrl,
      fleetId: 'fl_1',
      tokens: staticToken('t0k3n'),
      onReconnect: (r) => reconnects.push(r.lastEventId),
    })) {
      received.push(event)
      if (received.length === events.length) break
    }
    expect(received.map((e) => e.id)).toEqual(events.map((e) => e.id))
    expect(server.connections.map((c) => c.lastEventId)).toEqual([undefined, 'evt_0002', 'evt_0004', 'evt_0006'])
    expect(reconnects).toEqual(['evt_0002', 'evt_0004', 'evt_0006'])
    expect(server.connections.every((c) => c.authorization === 'Bearer t0k3n')).toBe(true)
    expect(server.connections[0]!.url).toBe('/v1/fleets/fl_1/exceptions/stream')
  })

  it('starts after a stored event id, and asks only for the types given', async () => {
    const events = Array.from({ length: 4 }, (_, i) => envelope(i + 1))
    server = await feedServer(events)
    const received: string[] = []
    for await (const event of subscribeExceptions({
      baseUrl: server.baseUrl,
      fleetId: 'fl_1',
      tokens: staticToken('t'),
      lastEventId: 'evt_0001',
      types: ['cold-chain.break', 'handoff.refused'],
    })) {
      received.push(event.id)
      if (received.length === 3) break
    }
    expect(received).toEqual(['evt_0002', 'evt_0003', 'evt_0004'])
    expect(server.connections[0]).toMatchObject({
      lastEventId: 'evt_0001',
      url: `/v1/fleets/fl_1/exceptions/stream?type=${encodeURIComponent('cold-chain.break,handoff.refused')}`,
    })
  })

  it('renews a refused token and goes on; ends with FeedError when the fleet is not visible', async () => {
    const events = [envelope(1), envelope(2)]
    let issued = 0
    const dropped: string[] = []
    const tokens: TokenSource = {
      token: async () => `token-${++issued}`,
      invalidate: (t) => {
        dropped.push(t)
      },
    }
    server = await feedServer(events, (req) => (req.headers.authorization === 'Bearer token-1' ? 401 : undefined))
    const received: string[] = []
    for await (const event of subscribeExceptions({ baseUrl: server.baseUrl, fleetId: 'fl_1', tokens, retryMs: 5 })) {
      received.push(event.id)
      if (received.length === 2) break
    }
    expect(received).toEqual(['evt_0001', 'evt_0002'])
    expect(dropped).toEqual(['token-1'])
    await server.close()

    server = await feedServer(events, () => 404)
    const feed = subscribeExceptions({ baseUrl: server.baseUrl, fleetId: 'fl_other', tokens: staticToken('t') })
    await expect(feed.next()).rejects.toThrow(FeedError)
    expect(server.connections).toHaveLength(1)
  })

  it('stops when its signal aborts, closing the connection', async () => {
    server = await feedServer([envelope(1), envelope(2)])
    const stop = new AbortController()
    const received: string[] = []
    for await (const event of subscribeExceptions({
      baseUrl: server.baseUrl,
      fleetId: 'fl_1',
      tokens: staticToken('t'),
      signal: stop.signal,
    })) {
      received.push(event.id)
      if (received.length === 2) stop.abort() // the server keeps this connection open: only the abort ends it
    }
    expect(received).toEqual(['evt_0001', 'evt_0002'])
  })
})

describe('the exception feed of the real service', () => {
  let api: TestApi
  let baseUrl: string
  let live = false
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
    live = await documents(baseUrl, 'get', '/v1/fleets/{id}/exceptions/stream')
  })
  afterAll(() => api?.stop())

  it("follows a fleet's exceptions and resumes after a reconnect", async () => {
    expect(live).toBe(true)
    const rx = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const fail = async () => {
      const rx1 = await api.prescription(admin, { pharmacy_id: pharmacy.id })
      await api.post(`/v1/deliveries/${rx1.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
      await api.post(`/v1/deliveries/${rx1.delivery_id}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'signed' })
      expect(
        (await api.post(`/v1/deliveries/${rx1.delivery_id}/fail`, admin, { reason: 'patient_unavailable', note: 'Nobody home' })).status,
      ).toBe(200)
      return rx1.delivery_id
    }
    // Without a Last-Event-ID the feed starts from now: subscribe, then fail a delivery.
    const stop = new AbortController()
    let opened!: () => void
    const open = new Promise<void>((resolve) => {
      opened = resolve
    })
    const feed = rx.exceptions(fleetId, { signal: stop.signal, onOpen: () => opened() })
    const next = feed.next()
    await open
    const first = await fail()
    const one = await next
    expect(one.value).toMatchObject({ type: 'delivery.failed', delivery_id: first, fleet_id: fleetId })
    expect(JSON.stringify(one.value)).not.toContain('pt_123') // no patient fields
    await feed.return(undefined) // disconnected: what happens now is picked up by the resume
    const second = await fail()
    const resumed = rx.exceptions(fleetId, { lastEventId: (one.value as FeedEvent).id, signal: stop.signal })
    expect((await resumed.next()).value).toMatchObject({ type: 'delivery.failed', delivery_id: second })
    stop.abort()
  })
})
