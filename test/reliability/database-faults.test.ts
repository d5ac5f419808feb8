import { sql } from 'kysely'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { postgresStore, reachablePostgres, type StoreUnderTest } from '../helpers/stores.js'
import { ADMIN, type TestApi } from '../helpers/service.js'
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js'
import { startReceiver, type Receiver } from '../webhooks/receiver.js'
import { waitFor } from '../helpers/wait.js'

// The service reaches PostgreSQL through a TCP proxy the tests control: it drops connections,
// refuses them (the server is down) or swallows every byte (a partition).
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the database fault tests: ${reasons.join('; ')}`)

// Short deadlines so an outage shows within a test, yet long enough for a healthy round trip on a
// loaded machine whose PostgreSQL the other test files share; the defaults are in src/config.ts.
const FAST_DEADLINES = {
  DATABASE_CONNECT_TIMEOUT_MS: '3000',
  DATABASE_STATEMENT_TIMEOUT_MS: '3000',
  READY_TIMEOUT_MS: '2500',
}
const ADDRESS = { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' }
const newPharmacy = (api: TestApi, token: string) =>
  api.post('/v1/pharmacies', token, { name: 'Fault Pharmacy', address: ADDRESS, timezone: 'America/Chicago' })

describe.skipIf(!url)('PostgreSQL going away', () => {
  let proxy: TcpProxy
  let store: StoreUnderTest
  let direct: pg.Client
  beforeAll(async () => {
    const target = new URL(url!)
    proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) })
    target.port = String(proxy.port)
    store = postgresStore(target.toString())
    direct = new pg.Client({ connectionString: url! })
    await direct.connect()
  })
  afterAll(async () => {
    proxy.forward()
    await store.cleanup()
    await direct.end()
    await proxy.close()
  })

  const readyz = (api: TestApi) => api.request('GET', '/readyz')

  it('survives its connections being terminated, answers 503 while the database is down, and recovers by itself', async () => {
    const api = await store.start(FAST_DEADLINES)
    await api.service.start() // the background loops (dispatcher, monitor, refreshes) run too
    const receiver: Receiver = await startReceiver()
    try {
      const admin = await api.adminToken()
      const pharmacy = (await newPharmacy(api, admin)).body as { id: string }
      expect(
        (await api.post('/v1/webhooks', admin, { url: receiver.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })).status,
      ).toBe(201)
      expect((await readyz(api)).status).toBe(200)

      // The server ends the sessions (pg_terminate_backend: what a restart or failover does), and
      // an idle proxy cuts whatever is left. Today's pg pool re-emits the error and kills the process.
      const ports = proxy.upstreamPorts()
      expect(ports.length).toBeGreaterThan(0)
      await direct.query('select pg_terminate_backend(pid) from pg_stat_activity where client_port = any($1::int[])', [ports])
      proxy.cut()

      // The database is down: nothing can connect.
      proxy.refuse()
      const notReady = await readyz(api)
      expect(notReady.status).toBe(503)
      expect(notReady.headers.get('content-type')).toContain('application/problem+json')
      expect(notReady.body).toMatchObject({ code: 'not_ready', checks: { entity_store: expect.not.stringMatching(/^ok$/) } })
      const refused = await newPharmacy(api, admin)
      expect(refused.status).toBe(503)
      expect(refused.body).toMatchObject({ code: 'not_ready' })
      // The loops meet the outage a few times: refused reconnects beyond the two requests' own.
      const refusedBefore = proxy.refused
      await waitFor(() => proxy.refused >= refusedBefore + 5, 15_000, 'the background loops refused by the database')

      // It comes back: no restart, the service finds it again.
      proxy.forward()
      await waitFor(async () => (await readyz(api)).status === 200, 15_000, '/readyz back to 200')
      expect((await newPharmacy(api, admin)).status).toBe(201)
      // The webhook dispatcher survived the outage too: a new event reaches the subscriber.
      await api.prescription(admin, { pharmacy_id: pharmacy.id })
      await waitFor(() => receiver.requests.some((r) => r.body.includes('delivery.created')), 15_000, 'a webhook after the outage')
    } finally {
      proxy.forward()
      await receiver.close()
      await api.stop()
    }
  }, 60_000)

  it('answers within its deadlines during a partition, and recovers when the network does', async () => {
    const api = await store.start(FAST_DEADLINES)
    try {
      const admin = await api.adminToken()
      expect((await newPharmacy(api, admin)).status).toBe(201) // the pool holds open connections
      expect((await readyz(api)).status).toBe(200)

      // Packets dropped, nothing refused: today both requests wait forever.
      proxy.blackHole()
      const [probe, write] = await Promise.all([readyz(api), newPharmacy(api, admin)])
      expect(probe.status).toBe(503)
      expect(probe.body).toMatchObject({ code: 'not_ready' })
      expect(write.status).toBe(503)
      expect(write.body).toMatchObject({ code: 'not_ready' })

      proxy.forward()
      await waitFor(async () => (await readyz(api)).status === 200, 15_000, '/readyz back to 200')
      expect((await newPharmacy(api, admin)).status).toBe(201)
    } finally {
      proxy.forward()
      await api.stop()
    }
  }, 60_000)
  it('fails every request with 503 within the connect deadline during a partition, whatever its statement deadline', async () => {
    // A statement deadline far longer than the test: a request on an open connection that waited
    // for it (or a transaction's ROLLBACK queued behind it, or the audit log's flushes in a row)
    // would never answer here. A silent database must be given up on after the connect deadline.
    const api = await store.start({ ...FAST_DEADLINES, DATABASE_STATEMENT_TIMEOUT_MS: '600000' })
    try {
      const admin = await api.adminToken()
      const pharmacy = (await newPharmacy(api, admin)).body as { id: string }
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
      // Open connections in the pool, idle, for the requests below to pick up.
      await Promise.all(Array.from({ length: 8 }, () => api.get('/v1/deliveries', admin)))

      proxy.blackHole()
      const basic = `Basic ${Buffer.from(`${ADMIN.id}:${ADMIN.secret}`).toString('base64')}`
      const form = (path: string, body: string) =>
        api.request('POST', path, { headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic }, raw: body })
      const requests: Record<string, () => Promise<{ status: number; body: unknown }>> = {
        'list deliveries': () => api.get('/v1/deliveries', admin),
        'read a delivery': () => api.get(`/v1/deliveries/${rx.delivery_id}`, admin),
        'verify custody': () => api.get(`/v1/deliveries/${rx.delivery_id}/custody/verify`, admin),
        'list pharmacies': () => api.get('/v1/pharmacies', admin),
        'list events': () => api.get('/v1/events', admin),
        'register a pharmacy (a transaction)': () => newPharmacy(api, admin),
        'idempotent prescription': () =>
          api.post(
            '/v1/prescriptions',
            admin,
            { patient_id: 'pt_1', cold_chain: false, pharmacy_id: pharmacy.id },
            { 'idempotency-key': 'k-1' },
          ),
        'audit log (flushes first)': () => api.get('/v1/audit-events', admin),
        'audit verification (flushes first)': () => api.get('/v1/audit-events/verify', admin),
        'token (client lookup)': () => form('/oauth/token', 'grant_type=client_credentials'),
        introspection: () => form('/oauth/introspect', `token=${admin}`),
      }
      const answers = await Promise.all(
        Object.entries(requests).map(async ([name, send]) => {
          const { status, body } = await send()
          return { name, status, code: (body as { code?: string } | null)?.code }
        }),
      )
      expect(answers).toEqual(Object.keys(requests).map((name) => ({ name, status: 503, code: 'not_ready' })))
      // Once the database was found silent, a new request is refused at once, not after its own wait.
      expect(await newPharmacy(api, admin)).toMatchObject({ status: 503, body: { code: 'not_ready' } })

      proxy.forward()
      await waitFor(async () => (await readyz(api)).status === 200, 15_000, '/readyz back to 200')
      expect((await newPharmacy(api, admin)).status).toBe(201)
    } finally {
      proxy.forward()
      await api.stop()
    }
  }, 60_000)

  it('lets a slow statement run to its statement deadline while the database answers', async () => {
    // The connect deadline alone would stop this statement; the database answering the probes meanwhile lets it finish.
    const api = await store.start({ ...FAST_DEADLINES, DATABASE_CONNECT_TIMEOUT_MS: '1000', DATABASE_STATEMENT_TIMEOUT_MS: '20000' })
    try {
      const { rows } = await sql<{ slept: boolean }>`select true as slept from pg_sleep(3)`.execute(api.service.db)
      expect(rows).toEqual([{ slept: true }])
    } finally {
      await api.stop()
    }
  }, 60_000)
})
