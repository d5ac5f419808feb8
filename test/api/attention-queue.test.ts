import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ClientRegistry, CONSOLE_CLIENT_ID, CONSOLE_SCOPE, ensureConsoleClient } from '../../src/auth/clients.js'
import { consoleRedirectUris } from '../../src/config.js'
import { CONSOLE_CSP } from '../../src/api/routes/console.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'

// The API under the pharmacist console: the attention order and filters of GET /v1/deliveries,
// the custody chain's party names, the console's client and its page.

// The order and filters are SQL of each dialect (a generated column, JSON in text): both stores.
const { url } = await reachablePostgres()
const stores = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

for (const store of stores)
  describe(`the attention queue on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let pharmacist: string
    const ids: Record<string, string> = {}

    /** What the rule engine writes as it judges a delivery. */
    async function setState(deliveryId: string, state: string, disposition: unknown = null) {
      const row = await api.service.db.selectFrom('deliveries').select('cold_chain').where('id', '=', deliveryId).executeTakeFirstOrThrow()
      await api.service.db
        .updateTable('deliveries')
        .set({
          cold_chain: JSON.stringify({ ...JSON.parse(row.cold_chain!), state }),
          disposition: disposition === null ? null : JSON.stringify(disposition),
        })
        .where('id', '=', deliveryId)
        .execute()
    }

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' })
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      for (const name of ['okOld', 'brokenOld', 'excursion', 'decided', 'brokenNew', 'okNew']) {
        ids[name] = (await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true })).delivery_id
      }
      await setState(ids.brokenOld!, 'BROKEN')
      await setState(ids.brokenNew!, 'BROKEN')
      await setState(ids.excursion!, 'EXCURSION')
      await setState(ids.decided!, 'BROKEN', {
        decision: 'return',
        note: 'n',
        decided_by: { client_id: 'cl_x', sub: 'us_x' },
        decided_at: '2026-01-01T00:00:00Z',
      })
      const client = (
        await api.post('/v1/oauth/clients', admin, {
          client_name: 'Back office',
          grant_types: ['client_credentials'],
          scope: 'deliveries:read',
          pharmacy_id: pharmacyId,
        })
      ).body
      pharmacist = await api.tokenFor(client.client_id, client.client_secret)
      // Another pharmacy's broken delivery never shows in this pharmacy's queue.
      const other = await api.pharmacy(admin, { name: 'Elsewhere' })
      await setState((await api.prescription(admin, { pharmacy_id: other.id, cold_chain: true })).delivery_id, 'BROKEN')
    })
    afterAll(() => api.stop())

    const order = ['brokenNew', 'brokenOld', 'excursion', 'okNew', 'decided', 'okOld']

    it('lists undecided breaks first, then excursions, then the rest, newest first in each', async () => {
      const res = await api.get('/v1/deliveries?order=attention', pharmacist)
      expect(res.status, res.text).toBe(200)
      expect(res.body.data.map((d: { id: string }) => d.id)).toEqual(order.map((n) => ids[n]))
      expect(res.body.next_cursor).toBeNull()
    })

    it('pages through that order with its own cursor, with nothing repeated or skipped', async () => {
      const seen: string[] = []
      let cursor: string | null = null
      do {
        const page: { body: { data: { id: string }[]; next_cursor: string | null } } = await api.get(
          `/v1/deliveries?order=attention&limit=2${cursor ? `&cursor=${cursor}` : ''}`,
          pharmacist,
        )
        seen.push(...page.body.data.map((d) => d.id))
        cursor = page.body.next_cursor
      } while (cursor)
      expect(seen).toEqual(order.map((n) => ids[n]))
      const forged = await api.get(`/v1/deliveries?order=attention&cursor=${Buffer.from('7.dl_x').toString('base64url')}`, pharmacist)
      expect(forged.status).toBe(422)
    })

    it('expands a page with its prescriptions and drivers in one request, for a token that may read prescriptions', async () => {
      const { fleetId, driverId } = await api.fleetWithDriver(admin)
      // Another pharmacy's, so this pharmacy's queue stays as the other tests expect it.
      const elsewhere = await api.pharmacy(admin, { name: 'Across Town' })
      const rx = await api.prescription(admin, {
        pharmacy_id: elsewhere.id,
        patient_id: 'pt_4711',
        items: [{ description: 'Insulin glargine 100 U/mL pen', ndc: '00088-2220-33', quantity: 5 }],
      })
      expect((await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })).status).toBe(
        200,
      )
      const res = await api.get('/v1/deliveries?order=attention&expand=prescription,driver', admin)
      expect(res.status, res.text).toBe(200)
      const mine = res.body.data.find((d: { id: string }) => d.id === rx.delivery_id)
      expect(mine.prescription).toEqual({
        patient_id: 'pt_4711',
        items: [{ description: 'Insulin glargine 100 U/mL pen', ndc: '00088-2220-33', quantity: 5 }],
        deliver_by: null,
        external_ref: null,
      })
      expect(mine.driver).toEqual({ id: driverId, name: 'Dana Driver' })
      const undispatched = res.body.data.find((d: { id: string }) => d.id === ids.okOld)
      expect(undispatched.driver).toBeNull()
      expect(undispatched.prescription.patient_id).toBe('pt_123')
      // Without expand, the list is as it was.
      expect((await api.get('/v1/deliveries?order=attention', admin)).body.data[0]).not.toHaveProperty('prescription')
      // Patient data needs the scope that reads prescriptions; a name outside the list is a 422 at its pointer.
      const refused = await api.get('/v1/deliveries?expand=prescription', pharmacist)
      expect(refused.status).toBe(403)
      expect((await api.get('/v1/deliveries?expand=driver', pharmacist)).status).toBe(200)
      const bad = await api.get('/v1/deliveries?expand=patient', admin)
      expect(bad.status).toBe(422)
      expect(bad.body.errors[0].pointer).toBe('/query/expand')
    })

    it('filters by cold-chain state and creation date', async () => {
      const broken = await api.get('/v1/deliveries?order=attention&cold_chain_state=BROKEN', pharmacist)
      expect(broken.body.data.map((d: { id: string }) => d.id)).toEqual([ids.brokenNew, ids.brokenOld, ids.decided])
      const future = new Date(Date.now() + 3_600_000).toISOString()
      expect((await api.get(`/v1/deliveries?created_from=${future}`, pharmacist)).body.data).toEqual([])
      expect((await api.get(`/v1/deliveries?created_to=${future}`, pharmacist)).body.data).toHaveLength(6)
      expect((await api.get('/v1/deliveries?order=sideways', pharmacist)).status).toBe(422)
    })
  })

describe('the console client and page', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService()
  })
  afterAll(() => api.stop())

  it('is a first-party public client redirecting to /console/ of the public URL, brought in line on each start', async () => {
    const clients = new ClientRegistry(api.service.db, api.service.clock)
    await ensureConsoleClient(clients, api.service.db, consoleRedirectUris({ ISSUER: 'https://rx.example.com/' }, 8080))
    expect(await clients.find(CONSOLE_CLIENT_ID)).toMatchObject({
      token_endpoint_auth_method: 'none',
      first_party: true,
      grant_types: ['authorization_code', 'refresh_token'],
      redirect_uris: ['https://rx.example.com/console/'],
      scope: CONSOLE_SCOPE,
    })
    await ensureConsoleClient(clients, api.service.db, consoleRedirectUris({}, 9090))
    expect((await clients.find(CONSOLE_CLIENT_ID))!.redirect_uris).toEqual([
      'http://localhost:9090/console/',
      'http://127.0.0.1:9090/console/',
    ])
    // A public client gets no token by itself.
    const res = await api.service.app.request('/oauth/token', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=client_credentials&client_id=${CONSOLE_CLIENT_ID}`,
    })
    expect(res.status).toBe(400)
    expect(((await res.json()) as { error: string }).error).toBe('unauthorized_client')
  })

  it('serves /console with a CSP that allows only its own origin', async () => {
    const res = await api.service.app.request('/console/')
    expect([200, 503]).toContain(res.status) // 503: a checkout whose console is not built says how to build it
    expect(res.headers.get('content-security-policy')).toBe(CONSOLE_CSP)
    expect(CONSOLE_CSP).not.toMatch(/unsafe|https?:|\*/)
    expect((await api.service.app.request('/console')).headers.get('location')).toBe('/console/')
    expect((await api.service.app.request('/console/assets/nothing.js')).status).toBe(404)
  })
})

describe("the custody chain's party names", () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' })
  })
  afterAll(() => api.stop())

  it('names the people the chain names, to whoever may see the delivery, and nobody else', async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const user = (
      await api.post('/v1/users', admin, {
        email: 'pat@example.com',
        name: 'Pat Pharmacist',
        role: 'pharmacist',
        pharmacy_id: pharmacy.id,
        password: 'correct horse battery staple',
      })
    ).body
    await api.post('/v1/users', admin, {
      email: 'other@example.com',
      name: 'Not In The Chain',
      role: 'pharmacist',
      pharmacy_id: pharmacy.id,
      password: 'correct horse battery staple',
    })
    const fleet = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    expect(
      (await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId, driver_id: fleet.driverId })).status,
    ).toBe(200)
    expect(
      (await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: user.id, to: fleet.driverId, signature: 's' })).status,
    ).toBe(200)
    const res = await api.get(`/v1/deliveries/${rx.delivery_id}/parties`, admin)
    expect(res.status, res.text).toBe(200)
    expect(res.body.data).toEqual(
      expect.arrayContaining([
        { id: user.id, kind: 'user', name: 'Pat Pharmacist' },
        { id: fleet.driverId, kind: 'driver', name: 'Dana Driver' },
      ]),
    )
    expect(JSON.stringify(res.body)).not.toContain('Not In The Chain')
    const other = await api.pharmacy(admin, { name: 'Elsewhere' })
    const client = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'x',
        grant_types: ['client_credentials'],
        scope: 'deliveries:read',
        pharmacy_id: other.id,
      })
    ).body
    expect(
      (await api.get(`/v1/deliveries/${rx.delivery_id}/parties`, await api.tokenFor(client.client_id, client.client_secret))).status,
    ).toBe(404)
  })
})
