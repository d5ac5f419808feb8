import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`

function tokenRequest(api: TestApi, fields: Record<string, string>, authorization?: string) {
  return api.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'client_credentials', ...fields }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization ? { authorization } : {}) },
  })
}

type Registered = { client_id: string; client_secret: string; scope: string }

describe('no token acts on a client more powerful than itself', () => {
  let api: TestApi
  let admin: string
  let pharmacyA: string
  let pharmacyB: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyA = (await api.pharmacy(admin, { name: 'A' })).id
    pharmacyB = (await api.pharmacy(admin, { name: 'B' })).id
  })
  afterAll(() => api.stop())

  const register = async (body: Record<string, unknown>, token = admin): Promise<Registered> => {
    const res = await api.post('/v1/oauth/clients', token, body)
    expect(res.status, res.text).toBe(201)
    return res.body
  }

  it('keeps a token holding only clients:write away from the admin client: no secret rotation, no read', async () => {
    const manager = await api.adminToken('clients:write')
    const rotate = await api.post(`/v1/oauth/clients/${ADMIN.id}/rotate-secret`, manager, { overlap_s: 0 })
    expect(rotate.status, rotate.text).toBe(403)
    expect(rotate.body.code).toBe('insufficient_scope')
    expect(rotate.text).not.toContain('client_secret')
    expect((await api.get(`/v1/oauth/clients/${ADMIN.id}`, manager)).status).toBe(403)
    // The admin's secret still works: nothing was rotated.
    expect((await tokenRequest(api, {}, basic(ADMIN.id, ADMIN.secret))).status).toBe(200)
  })

  it("refuses a pharmacy's client manager the more powerful clients of its own pharmacy, and answers another pharmacy's as unknown", async () => {
    const manager = await register({ client_name: 'A manager', scope: 'clients:write prescriptions:read', pharmacy_id: pharmacyA })
    const token = await api.tokenFor(manager.client_id, manager.client_secret)
    const stronger = await register({ client_name: 'A writer', scope: 'prescriptions:read prescriptions:write', pharmacy_id: pharmacyA })
    const weaker = await register({ client_name: 'A reader', scope: 'prescriptions:read', pharmacy_id: pharmacyA })
    const elsewhere = await register({ client_name: 'B reader', scope: 'prescriptions:read', pharmacy_id: pharmacyB })

    expect((await api.post(`/v1/oauth/clients/${stronger.client_id}/rotate-secret`, token, {})).status).toBe(403)
    const foreign = await api.post(`/v1/oauth/clients/${elsewhere.client_id}/rotate-secret`, token, {})
    const unknown = await api.post('/v1/oauth/clients/cl_01jd0000000000000000000000/rotate-secret', token, {})
    expect(foreign.status).toBe(404)
    expect(foreign.body.detail).toBe(unknown.body.detail)
    const rotated = await api.post(`/v1/oauth/clients/${weaker.client_id}/rotate-secret`, token, {})
    expect(rotated.status, rotated.text).toBe(200)
  })

  it('gives a client registered without scope only read-only scopes of its kind, never everything its creator holds', async () => {
    const unrestricted = await register({ client_name: 'no scope named' })
    expect(unrestricted.scope.split(' ').sort()).toEqual([
      'deliveries:read',
      'fleet:read',
      'pharmacies:read',
      'prescriptions:read',
      'telemetry:read',
    ])
    const pharmacy = await register({ client_name: 'pharmacy, no scope named', pharmacy_id: pharmacyA })
    expect(pharmacy.scope.split(' ').sort()).toEqual(['deliveries:read', 'pharmacies:read', 'prescriptions:read', 'telemetry:read'])
    const issued = await tokenRequest(api, {}, basic(pharmacy.client_id, pharmacy.client_secret))
    expect(issued.body.scope).not.toContain('write')
  })
})

describe('cold-chain:disposition is a pharmacy decision', () => {
  let api: TestApi
  let admin: string
  let fleetId: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    fleetId = (await api.fleetWithDriver(admin)).fleetId
  })
  afterAll(() => api.stop())

  it('is refused to a fleet-restricted client at registration', async () => {
    const res = await api.post('/v1/oauth/clients', admin, {
      client_name: 'courier',
      scope: 'deliveries:read cold-chain:disposition',
      fleet_id: fleetId,
    })
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/scope' })])
  })

  it('is left out of the tokens of a fleet client registered with it before the rule', async () => {
    const created = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'older courier',
        scope: 'deliveries:read custody:write',
        fleet_id: fleetId,
      })
    ).body
    // A registration written before the rule existed.
    await api.service.db
      .updateTable('oauth_clients')
      .set({ scope: 'deliveries:read custody:write cold-chain:disposition' })
      .where('client_id', '=', created.client_id)
      .execute()
    const issued = await tokenRequest(api, {}, basic(created.client_id, created.client_secret))
    expect(issued.status).toBe(200)
    expect(issued.body.scope).toBe('deliveries:read custody:write')
    expect(decodeJwt(issued.body.access_token).scope).toBe('deliveries:read custody:write')
    const asked = await tokenRequest(api, { scope: 'cold-chain:disposition' }, basic(created.client_id, created.client_secret))
    expect(asked.status).toBe(400)
    expect(asked.body.error).toBe('invalid_scope')
  })
})

describe('client authentication per RFC 6749 §2.3', () => {
  let api: TestApi
  let admin: string
  let poster: Registered
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    poster = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'form poster',
        scope: 'pharmacies:read',
        token_endpoint_auth_method: 'client_secret_post',
      })
    ).body
  })
  afterAll(() => api.stop())

  it('accepts only the registered method', async () => {
    expect((await tokenRequest(api, { client_id: poster.client_id, client_secret: poster.client_secret })).status).toBe(200)
    const byBasic = await tokenRequest(api, {}, basic(poster.client_id, poster.client_secret))
    expect(byBasic.status).toBe(401)
    expect(byBasic.body.error).toBe('invalid_client')
    // The admin client is registered for client_secret_basic.
    const adminByPost = await tokenRequest(api, { client_id: ADMIN.id, client_secret: ADMIN.secret })
    expect(adminByPost.status).toBe(401)
    expect(adminByPost.body.error).toBe('invalid_client')
  })

  it('refuses a request using two methods at once with invalid_request', async () => {
    const both = await tokenRequest(
      api,
      { client_id: poster.client_id, client_secret: poster.client_secret },
      basic(poster.client_id, poster.client_secret),
    )
    expect(both.status).toBe(400)
    expect(both.body.error).toBe('invalid_request')
    const adminBoth = await tokenRequest(api, { client_secret: ADMIN.secret }, basic(ADMIN.id, ADMIN.secret))
    expect(adminBoth.status).toBe(400)
    expect(adminBoth.body.error).toBe('invalid_request')
  })
})
