import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { openSse, type SseStream } from '../helpers/sse.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'

/**
 * GET /v1/events/stream over real HTTP, on SQLite and PostgreSQL: events arrive live, framed as
 * SSE with the envelope GET /v1/events lists; a reconnect with Last-Event-ID resumes with no gap
 * and no duplicate, also when a transaction that took a lower position commits later
 * (PostgreSQL); the tenant walls of GET /v1/events hold; one tail read serves every stream.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

function describeStreams(store: StoreUnderTest) {
  describe(`GET /v1/events/stream on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let pharmacyId: string
    const open: SseStream[] = []
    const sse = async (path: string, token: string, headers: Record<string, string> = {}) => {
      const stream = await openSse(`${base}${path}`, token, headers)
      open.push(stream)
      return stream
    }

    beforeAll(async () => {
      // Polling far apart: what arrives here was woken by the commit, or the test waits long.
      api = await store.start({ EVENT_STREAM_POLL_MS: '200' })
      const { httpPort } = await api.service.start()
      base = `http://127.0.0.1:${httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
    })
    afterAll(async () => {
      await Promise.all(open.map((s) => s.close()))
      await api?.stop()
      await store.cleanup()
    })

    const append = (trx: Parameters<TestApi['service']['outbox']['append']>[0], what: string, pharmacy = pharmacyId) =>
      api.service.outbox.append(trx, [{ type: 'test.stream', pharmacy_id: pharmacy, data: { what } }]).then((a) => a.events[0]!.id)
    const write = async (what: string) => {
      const id = await api.service.db.transaction().execute((trx) => append(trx, what))
      api.service.outbox.committed(0)
      return id
    }

    it('sends retry: 2000 first, then each new event framed with the envelope GET /v1/events lists', async () => {
      const stream = await sse('/v1/events/stream', admin)
      expect(stream.status).toBe(200)
      expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/)
      expect(stream.headers.get('cache-control')).toBe('no-store')
      await stream.until(() => stream.raw.length > 0, 'the first bytes')
      expect(stream.raw.split('\n')[0]).toBe('retry: 2000')
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      await stream.until(() => stream.events().some((e) => e.data.delivery_id === rx.delivery_id), 'delivery.created')
      const listed = (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)).body.data[0]
      const sent = stream.events().find((e) => e.data.delivery_id === rx.delivery_id)!
      expect(sent).toEqual({ id: listed.id, event: 'delivery.created', data: listed })
      expect(stream.raw).toContain(`id: ${listed.id}\nevent: delivery.created\ndata: ${JSON.stringify(listed)}\n\n`)
    })

    it('starts now: events committed before the stream opened are not sent', async () => {
      const before = await write('before the stream')
      // "Now" is the end of what GET /v1/events lists: on PostgreSQL a committed event is listed
      // once the transactions that were running when it was written have ended.
      await waitFor(
        async () => (await api.get('/v1/events?type=test.stream&limit=100', admin)).body.data.some((e: { id: string }) => e.id === before),
        20_000,
        'the event to be listed',
      )
      const stream = await sse('/v1/events/stream?type=test.stream', admin)
      const after = await write('after the stream opened')
      await stream.untilEvents(1)
      expect(stream.events().map((e) => e.id)).toEqual([after])
      expect(stream.events().map((e) => e.id)).not.toContain(before)
    })

    it('resumes after Last-Event-ID with no gap and no duplicate', async () => {
      const anchor = await write('anchor')
      const first = await sse('/v1/events/stream?type=test.stream', admin, { 'last-event-id': anchor })
      const written = [await write('a'), await write('b')]
      await first.untilEvents(2)
      await first.close()
      // Written while no stream was open…
      for (const what of ['c', 'd', 'e']) written.push(await write(what))
      const seen = first.events().map((e) => e.id)
      const second = await sse('/v1/events/stream?type=test.stream', admin, { 'last-event-id': seen.at(-1)! })
      // …and while the second catches up.
      written.push(await write('f'))
      await second.untilEvents(4)
      const all = [...seen, ...second.events().map((e) => e.id)]
      expect(all).toEqual(written)
      // `?after=` does the same as the header.
      const third = await sse(`/v1/events/stream?type=test.stream&after=${written[2]}`, admin)
      await third.untilEvents(3)
      expect(third.events().map((e) => e.id)).toEqual(written.slice(3))
    })

    it('filters by a comma-separated list of types and by delivery_id', async () => {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      // Its delivery.created is listed (so before where the streams start) before they open.
      await waitFor(
        async () => (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)).body.data.length === 1,
        20_000,
        'delivery.created to be listed',
      )
      const byType = await sse('/v1/events/stream?type=delivery.cancelled,test.stream', admin)
      const byDelivery = await sse(`/v1/events/stream?delivery_id=${rx.delivery_id}`, admin)
      const other = await api.prescription(admin, { pharmacy_id: pharmacyId })
      await api.post(`/v1/deliveries/${other.delivery_id}/cancel`, admin, { reason: 'not needed' })
      await api.post(`/v1/deliveries/${rx.delivery_id}/cancel`, admin, { reason: 'not needed' })
      const marker = await write('marker')
      await byType.until(() => byType.events().some((e) => e.id === marker), 'the marker')
      expect(byType.events().map((e) => [e.event, e.data.delivery_id ?? null])).toEqual([
        ['delivery.cancelled', other.delivery_id],
        ['delivery.cancelled', rx.delivery_id],
        ['test.stream', null],
      ])
      await byDelivery.untilEvents(1)
      expect(byDelivery.events().map((e) => e.event)).toEqual(['delivery.cancelled'])
    })

    it("shows a pharmacy's token only its own events, and answers another tenant's Last-Event-ID as an unknown one", async () => {
      const other = (await api.pharmacy(admin)).id
      const client = (
        await api.post('/v1/oauth/clients', admin, { client_name: 'stream reader', scope: 'deliveries:read', pharmacy_id: pharmacyId })
      ).body
      const mine = await api.tokenFor(client.client_id, client.client_secret)
      const stream = await sse('/v1/events/stream?type=test.stream', mine)
      const theirs = await api.service.db.transaction().execute((trx) => append(trx, 'another pharmacy', other))
      const own = await write('own')
      await stream.until(() => stream.events().some((e) => e.id === own), 'its own event')
      expect(stream.events().map((e) => e.id)).toEqual([own])

      const foreign = await sse('/v1/events/stream', mine, { 'last-event-id': theirs })
      const unknown = await sse('/v1/events/stream', mine, { 'last-event-id': 'evt_01jd0000000000000000000000' })
      expect([foreign.status, unknown.status]).toEqual([404, 404])
      expect(JSON.parse(foreign.text).detail).toBe(JSON.parse(unknown.text).detail)

      const noScope = (
        await api.post('/v1/oauth/clients', admin, { client_name: 'no read', scope: 'pharmacies:read', pharmacy_id: pharmacyId })
      ).body
      const refused = await sse('/v1/events/stream', await api.tokenFor(noScope.client_id, noScope.client_secret))
      expect(refused.status).toBe(403)
      expect((await fetch(`${base}/v1/events/stream`)).status).toBe(401)
    })

    // SQLite has one writer at a time: two transactions cannot overlap there.
    if (store.name === 'postgres')
      it('sends an event whose transaction took the lower position and committed later, once, in feed order', async () => {
        const anchor = await write('anchor')
        const stream = await sse('/v1/events/stream?type=test.stream', admin, { 'last-event-id': anchor })
        let commitFirst!: () => void
        let firstWritten!: (id: string) => void
        const firstId = new Promise<string>((resolve) => (firstWritten = resolve))
        const first = api.service.db.transaction().execute(async (trx) => {
          firstWritten(await append(trx, 'lower position, commits last'))
          await new Promise<void>((resolve) => (commitFirst = resolve))
        })
        const lower = await firstId
        let higher: string
        try {
          higher = await write('higher position, commits first')
          // A reconnect meanwhile: the new stream resumes after what the first one had.
          const resumed = await sse('/v1/events/stream?type=test.stream', admin, { 'last-event-id': anchor })
          commitFirst()
          await first
          api.service.outbox.committed(0)
          await stream.untilEvents(2)
          await resumed.untilEvents(2)
          expect(resumed.events().map((e) => e.id)).toEqual([lower, higher])
        } finally {
          commitFirst()
          await first
        }
        expect(stream.events().map((e) => e.id)).toEqual([lower, higher])
      })

    it('feeds every open stream from one read of the store per commit', async () => {
      const streams = await Promise.all(Array.from({ length: 20 }, () => sse('/v1/events/stream?type=test.stream', admin)))
      await Promise.all(streams.map((s) => s.until(() => s.raw.length > 0, 'the stream to open')))
      const before = api.service.streams.stats().tailReads
      const started = Date.now()
      const id = await write('to all')
      await Promise.all(streams.map((s) => s.until(() => s.events().some((e) => e.id === id), 'the event', 20_000)))
      const reads = api.service.streams.stats().tailReads - before
      // A wake-up, and a poll every 200 ms meanwhile (on PostgreSQL the event is listed only once
      // older transactions on the server end, which under load can take seconds): one tail's reads.
      // Twenty streams reading for themselves would make twenty times as many.
      const polls = Math.ceil((Date.now() - started) / 200)
      expect(reads).toBeLessThanOrEqual(2 + polls)
      await Promise.all(streams.map((s) => s.close()))
    })
  })
}

describeStreams(sqliteStore)
if (url) describeStreams(postgresStore(url))

describe('stream limits, heartbeats, backpressure and shutdown', () => {
  let api: TestApi
  let base: string
  let admin: string
  const open: SseStream[] = []
  beforeAll(async () => {
    api = await sqliteStore.start({ EVENT_STREAM_HEARTBEAT_S: '0.05', EVENT_STREAM_MAX_PER_TENANT: '2', EVENT_STREAM_BUFFER_KB: '16' })
    const { httpPort } = await api.service.start()
    base = `http://127.0.0.1:${httpPort}`
    admin = await api.adminToken()
  })
  let stopped = false
  afterAll(async () => {
    await Promise.all(open.map((s) => s.close()))
    if (!stopped) await api?.stop()
  })
  const sse = async (path: string, token: string, headers: Record<string, string> = {}) => {
    const stream = await openSse(`${base}${path}`, token, headers)
    open.push(stream)
    return stream
  }

  it('sends a heartbeat comment on a quiet stream', async () => {
    const stream = await sse('/v1/events/stream', admin)
    await stream.until(() => stream.frames.some((f) => f.comment === 'heartbeat'), 'a heartbeat')
    expect(stream.raw).toContain('\n\n: heartbeat\n\n')
    await stream.close()
    await waitFor(() => api.service.streams.stats().subscribers === 0, 5_000, 'the closed stream to be forgotten')
  })

  it("refuses a tenant's stream past its limit with 429, and takes one again once a stream closed", async () => {
    const a = await sse('/v1/events/stream', admin)
    const b = await sse('/v1/events/stream', admin)
    const refused = await sse('/v1/events/stream', admin)
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBeTruthy()
    expect(JSON.parse(refused.text).code).toBe('rate_limited')
    // Another tenant is not held back by this one's streams.
    const pharmacy = (await api.pharmacy(admin)).id
    const client = (
      await api.post('/v1/oauth/clients', admin, { client_name: 'other tenant', scope: 'deliveries:read', pharmacy_id: pharmacy })
    ).body
    const other = await sse('/v1/events/stream', await api.tokenFor(client.client_id, client.client_secret))
    expect(other.status).toBe(200)
    await a.close()
    await waitFor(() => api.service.streams.stats().subscribers === 2, 5_000, 'the closed stream to be forgotten')
    const again = await sse('/v1/events/stream', admin)
    expect(again.status).toBe(200)
    await Promise.all([b.close(), other.close(), again.close()])
    await waitFor(() => api.service.streams.stats().subscribers === 0, 5_000, 'every stream to be forgotten')
  })

  it('cuts off a reader that stopped reading, with its backlog held to the bound', async () => {
    const { connect } = await import('node:net')
    const socket = connect(Number(new URL(base).port), '127.0.0.1')
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    let closed = false
    socket.once('close', () => (closed = true))
    socket.on('error', () => {})
    socket.write(`GET /v1/events/stream?type=test.big HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${admin}\r\n\r\n`)
    await new Promise<void>((resolve) => socket.once('data', () => resolve()))
    socket.pause() // the reader stalls: nothing more is read from the socket
    const before = api.service.streams.stats()
    expect(before.subscribers).toBe(1)

    const pharmacy = (await api.pharmacy(admin)).id
    const filler = 'x'.repeat(8 * 1024)
    // Far more than the socket buffers and the 16 KiB bound can hold: 64 MiB at most, in 8 KiB events.
    for (let i = 0; i < 8_192 && api.service.streams.stats().cutOff === before.cutOff; i++) {
      await api.service.db
        .transaction()
        .execute((trx) => api.service.outbox.append(trx, [{ type: 'test.big', pharmacy_id: pharmacy, data: { i, filler } }]))
      api.service.outbox.committed(0)
      if (i % 32 === 31) await new Promise((resolve) => setImmediate(resolve))
    }
    await waitFor(() => api.service.streams.stats().cutOff === before.cutOff + 1, 10_000, 'the stalled stream to be cut off')
    // Read what the socket buffers still hold: then the end of the closed connection shows.
    socket.resume()
    await waitFor(() => closed, 10_000, 'the connection to be closed')
    const after = api.service.streams.stats()
    expect(after.subscribers).toBe(0)
    // The bound, plus the one event that crossed it.
    expect(after.largestBacklogBytes).toBeLessThanOrEqual(16 * 1024 + filler.length + 1_024)
    socket.destroy()
  })

  it('ends a stream cleanly when the token that opened it expires', async () => {
    const body = await api.service.streams.open({ tenant: 'expiring', scope: {}, after: null, endsInMs: 50 })
    const reader = body.getReader()
    const chunks: string[] = []
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(Buffer.from(value).toString())
    }
    expect(chunks.join('')).toMatch(/^retry: 2000\n\n/)
    await waitFor(() => api.service.streams.stats().subscribers === 0, 5_000, 'the ended stream to be forgotten')
  })

  it('ends a stream cleanly once the token that opened it is revoked', async () => {
    const client = (await api.post('/v1/oauth/clients', admin, { client_name: 'revoked reader', scope: 'deliveries:read' })).body
    const token = await api.tokenFor(client.client_id, client.client_secret)
    const stream = await sse('/v1/events/stream', token)
    await stream.until(() => stream.frames.some((f) => f.comment === 'heartbeat'), 'a heartbeat')
    const revoked = await api.service.app.request('/oauth/revoke', {
      method: 'POST',
      body: new URLSearchParams({ token }).toString(),
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
      },
    })
    expect(revoked.status).toBe(200)
    expect(await stream.untilEnded()).toBe('done')
  })

  it('ends every stream cleanly when the service stops', async () => {
    const stream = await sse('/v1/events/stream', admin)
    await stream.until(() => stream.raw.length > 0, 'the stream to open')
    stopped = true
    await api.stop()
    expect(await stream.untilEnded()).toBe('done')
    expect(api.service.streams.stats().subscribers).toBe(0)
  })
})
