import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HOUR, SECOND, testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'

const PHARMACY_SCOPES = 'prescriptions:read prescriptions:write deliveries:read deliveries:write custody:write'

function tokenByPost(api: TestApi, clientId: string, secret: string) {
  return api.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  })
}

describe('a client restricted to one pharmacy', () => {
  let api: TestApi
  let admin: string
  let a: { id: string }
  let b: { id: string }
  let client: { client_id: string; client_secret: string }
  let token: string
  let rxA: { rx_id: string; delivery_id: string }
  let rxB: { rx_id: string; delivery_id: string }
  let fleetId: string

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    a = await api.pharmacy(admin, { name: 'Pharmacy A' })
    b = await api.pharmacy(admin, { name: 'Pharmacy B' })
    fleetId = (await api.fleetWithDriver(admin)).fleetId
    rxB = await api.prescription(admin, { pharmacy_id: b.id })
    const created = await api.post('/v1/oauth/clients', admin, {
      client_name: 'Pharmacy A back office',
      grant_types: ['client_credentials'],
      scope: PHARMACY_SCOPES,
      token_endpoint_auth_method: 'client_secret_post',
      pharmacy_id: a.id,
    })
    expect(created.status, created.text).toBe(201)
    client = created.body
    const issued = await tokenByPost(api, client.client_id, client.client_secret)
    expect(issued.status).toBe(200)
    token = issued.body.access_token
    rxA = await api.prescription(token, {}) // pharmacy_id defaults to the token's pharmacy
  })
  afterAll(() => api.stop())

  it('is registered with RFC 7591 fields, its secret shown once and never again', async () => {
    expect(client).toMatchObject({
      client_id: expect.stringMatching(/^cl_/),
      client_secret: expect.any(String),
      client_name: 'Pharmacy A back office',
      grant_types: ['client_credentials'],
      scope: PHARMACY_SCOPES,
      token_endpoint_auth_method: 'client_secret_post',
      pharmacy_id: a.id,
      fleet_id: null,
    })
    const read = await api.get(`/v1/oauth/clients/${client.client_id}`, admin)
    expect(read.status).toBe(200)
    expect(read.body).not.toHaveProperty('client_secret')
    expect(read.text).not.toContain(client.client_secret)
  })

  it('gets tokens carrying its pharmacy and only its scopes', async () => {
    expect(decodeJwt(token)).toMatchObject({ pharmacy_id: a.id, scope: PHARMACY_SCOPES, client_id: client.client_id })
    const more = await api.request('POST', '/oauth/token', {
      raw: new URLSearchParams({
        grant_type: 'client_credentials',
        client_id: client.client_id,
        client_secret: client.client_secret,
        scope: 'audit:read',
      }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expect(more.status).toBe(400)
    expect(more.body.error).toBe('invalid_scope')
  })

  it("sees its own pharmacy's prescription and delivery", async () => {
    expect(rxA).toMatchObject({ pharmacy_id: a.id })
    expect((await api.get(`/v1/prescriptions/${rxA.rx_id}`, token)).status).toBe(200)
    expect((await api.get(`/v1/deliveries/${rxA.delivery_id}`, token)).status).toBe(200)
  })

  it("answers 404 for pharmacy B's prescription, delivery, custody and pharmacy, as if they did not exist", async () => {
    for (const path of [
      `/v1/prescriptions/${rxB.rx_id}`,
      `/v1/deliveries/${rxB.delivery_id}`,
      `/v1/deliveries/${rxB.delivery_id}/custody/verify`,
    ]) {
      const res = await api.get(path, token)
      expect(res.status, path).toBe(404)
      expect(res.body.code).toBe('not_found')
    }
    const missing = await api.get('/v1/prescriptions/rx_01jd0000000000000000000000', token)
    expect(missing.body.detail).toBe((await api.get(`/v1/prescriptions/${rxB.rx_id}`, token)).body.detail) // indistinguishable
  })

  it("leaves pharmacy B's items out of every list", async () => {
    const prescriptions = await api.get('/v1/prescriptions?limit=100', token)
    expect(prescriptions.body.data.map((p: { rx_id: string }) => p.rx_id)).toEqual([rxA.rx_id])
    const deliveries = await api.get('/v1/deliveries?limit=100', token)
    expect(deliveries.body.data.map((d: { id: string }) => d.id)).toEqual([rxA.delivery_id])
    const filtered = await api.get(`/v1/deliveries?pharmacy_id=${b.id}`, token)
    expect(filtered.body.data).toEqual([])
    const events = await api.get('/v1/events?limit=100', token)
    expect(events.body.data.every((e: { pharmacy_id: string }) => e.pharmacy_id === a.id)).toBe(true)
    expect(events.body.data.length).toBeGreaterThan(0)
    // The admin sees both, so the lists above are filtered, not empty by accident.
    expect((await api.get('/v1/prescriptions?limit=100', admin)).body.data).toHaveLength(2)
  })

  it("cannot move pharmacy B's delivery, nor queue a prescription for pharmacy B", async () => {
    const cancel = await api.post(`/v1/deliveries/${rxB.delivery_id}/cancel`, token, { reason: 'not mine' })
    expect(cancel.status).toBe(404)
    const dispatch = await api.post(`/v1/deliveries/${rxB.delivery_id}/dispatch`, token, { fleet_id: fleetId })
    expect(dispatch.status).toBe(404)
    expect((await api.get(`/v1/deliveries/${rxB.delivery_id}`, admin)).body.status).toBe('QUEUED')
    const queued = await api.post(
      '/v1/prescriptions',
      token,
      { patient_id: 'pt_9', cold_chain: false, pharmacy_id: b.id },
      { 'idempotency-key': 'cross-tenant' },
    )
    expect(queued.status).toBe(404)
  })

  it('moves its own delivery', async () => {
    const res = await api.post(`/v1/deliveries/${rxA.delivery_id}/dispatch`, token, { fleet_id: fleetId })
    expect(res.status, res.text).toBe(200)
  })

  it('is refused what its scopes do not cover', async () => {
    const res = await api.post('/v1/pharmacies', token, { name: 'x' })
    expect(res.status).toBe(403)
    expect(res.body.code).toBe('insufficient_scope')
  })

  it("can neither revoke nor introspect another client's token (RFC 7009 §2.1, RFC 7662 §4)", async () => {
    const adminToken = await api.adminToken('pharmacies:read')
    const form = (path: string) =>
      api.request('POST', path, {
        raw: new URLSearchParams({ token: adminToken, client_id: client.client_id, client_secret: client.client_secret }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      })
    expect((await form('/oauth/introspect')).body).toEqual({ active: false })
    expect((await form('/oauth/revoke')).status).toBe(200) // answered as if done…
    expect((await api.get('/v1/pharmacies', adminToken)).status).toBe(200) // …but the token still works
  })

  it('cannot be created with scopes the creator does not hold', async () => {
    const narrow = await api.adminToken('clients:write pharmacies:read')
    const res = await api.post('/v1/oauth/clients', narrow, { client_name: 'greedy', scope: 'audit:read' })
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/scope' })])
  })
})

describe('a client restricted to one fleet', () => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('sees and moves only the deliveries dispatched to its fleet', async () => {
    const pharmacy = await api.pharmacy(admin)
    const mine = await api.fleetWithDriver(admin)
    const theirs = await api.fleetWithDriver(admin)
    const created = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'courier app',
        scope: 'deliveries:read custody:write fleet:read',
        fleet_id: mine.fleetId,
      })
    ).body
    const token = await api.tokenFor(created.client_id, created.client_secret)
    const ours = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const other = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const queued = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await api.post(`/v1/deliveries/${ours.delivery_id}/dispatch`, admin, { fleet_id: mine.fleetId, driver_id: mine.driverId })
    await api.post(`/v1/deliveries/${other.delivery_id}/dispatch`, admin, { fleet_id: theirs.fleetId, driver_id: theirs.driverId })

    expect((await api.get('/v1/deliveries', token)).body.data.map((d: { id: string }) => d.id)).toEqual([ours.delivery_id])
    expect((await api.get(`/v1/deliveries/${other.delivery_id}`, token)).status).toBe(404)
    expect((await api.get(`/v1/deliveries/${queued.delivery_id}`, token)).status).toBe(404) // not dispatched to anyone yet
    expect((await api.get(`/v1/fleets/${theirs.fleetId}`, token)).status).toBe(404)
    expect((await api.get('/v1/pharmacies', token)).status).toBe(403)

    const pickup = { from: pharmacy.id, to: mine.driverId, signature: 'sig' }
    expect((await api.post(`/v1/deliveries/${other.delivery_id}/pickup`, token, { ...pickup, to: theirs.driverId })).status).toBe(404)
    expect((await api.post(`/v1/deliveries/${ours.delivery_id}/pickup`, token, pickup)).status).toBe(200)
    const foreignDriver = await api.post(`/v1/deliveries/${ours.delivery_id}/handoff`, token, {
      from: mine.driverId,
      to: theirs.driverId,
      signature: 'sig',
    })
    expect(foreignDriver.status).toBe(422)
    expect(foreignDriver.body.errors).toEqual([expect.objectContaining({ pointer: '/to' })])
  })
})

describe('rotating a client secret', () => {
  const clock = testClock()
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService({}, { clock })
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('accepts the old and the new secret during the overlap, and only the new one after it', async () => {
    const client = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'rotating',
        scope: 'pharmacies:read',
        token_endpoint_auth_method: 'client_secret_post',
      })
    ).body
    const rotated = await api.post(`/v1/oauth/clients/${client.client_id}/rotate-secret`, admin, { overlap_s: 3_600 })
    expect(rotated.status, rotated.text).toBe(200)
    expect(rotated.headers.get('cache-control')).toBe('no-store')
    expect(rotated.body).toMatchObject({
      client_id: client.client_id,
      client_secret: expect.any(String),
      previous_secret_expires_at: new Date(clock.now() + HOUR).toISOString(),
    })
    const next = rotated.body.client_secret
    expect(next).not.toBe(client.client_secret)

    expect((await tokenByPost(api, client.client_id, client.client_secret)).status).toBe(200)
    expect((await tokenByPost(api, client.client_id, next)).status).toBe(200)

    clock.advance(HOUR + SECOND)
    const old = await tokenByPost(api, client.client_id, client.client_secret)
    expect(old.status).toBe(401)
    expect(old.body.error).toBe('invalid_client')
    expect((await tokenByPost(api, client.client_id, next)).status).toBe(200)
  })
})
