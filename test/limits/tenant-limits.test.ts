import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SECOND, testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/** A client restricted to one pharmacy, made by the admin, and a token for it. */
async function pharmacyClient(api: TestApi, admin: string, pharmacyId: string, scope: string) {
  const res = await api.post('/v1/oauth/clients', admin, { client_name: `${pharmacyId} app`, scope, pharmacy_id: pharmacyId })
  if (res.status !== 201) throw new Error(`client: ${res.status} ${res.text}`)
  return { id: res.body.client_id as string, token: await api.tokenFor(res.body.client_id, res.body.client_secret) }
}

describe('per-tenant limits on webhook endpoints, clients and totes (SPEC §11)', () => {
  let api: TestApi
  let admin: string
  let pharmacyA: string
  let pharmacyB: string
  beforeAll(async () => {
    api = await startTestService({ TENANT_MAX_WEBHOOKS: '3', TENANT_MAX_CLIENTS: '2', TENANT_MAX_TOTES: '2' })
    admin = await api.adminToken()
    pharmacyA = (await api.pharmacy(admin)).id
    pharmacyB = (await api.pharmacy(admin)).id
  })
  afterAll(() => api.stop())

  it("refuses a tenant's webhook endpoint beyond the limit with 409 limit_exceeded; deleting one makes room", async () => {
    const { token } = await pharmacyClient(api, admin, pharmacyA, 'webhooks:read webhooks:write')
    const register = (n: number, as = token) => api.post('/v1/webhooks', as, { url: `http://127.0.0.1:9/hook-${n}`, events: ['*'] })
    const created = [await register(1), await register(2), await register(3)]
    expect(created.map((r) => r.status)).toEqual([201, 201, 201])

    const fourth = await register(4)
    expect(fourth.status).toBe(409)
    expect(fourth.headers.get('content-type')).toBe('application/problem+json')
    expect(fourth.body).toMatchObject({ status: 409, code: 'limit_exceeded', limit: 3, resource: 'webhook_endpoints' })

    // Another tenant has its own allowance.
    const other = await pharmacyClient(api, admin, pharmacyB, 'webhooks:write')
    expect((await register(4, other.token)).status).toBe(201)

    expect((await api.request('DELETE', `/v1/webhooks/${created[0]!.body.id}`, { token })).status).toBe(204)
    expect((await register(4)).status).toBe(201)
  })

  it('refuses a second endpoint of one tenant at the same URL (one event, one POST per URL)', async () => {
    const { token } = await pharmacyClient(api, admin, pharmacyB, 'webhooks:write')
    const url = 'http://127.0.0.1:9/same'
    const first = await api.post('/v1/webhooks', token, { url, events: ['delivery.created'] })
    expect(first.status).toBe(201)
    const again = await api.post('/v1/webhooks', token, { url, events: ['delivery.delivered'] })
    expect(again.status).toBe(409)
    expect(again.body).toMatchObject({ code: 'conflict', errors: [{ pointer: '/url' }] })
  })

  it("refuses a tenant's third client when two are allowed; unrestricted clients are not counted", async () => {
    const body = (pharmacy_id: string) => ({ client_name: 'pos', scope: 'prescriptions:read', pharmacy_id })
    const fleet = (await api.post('/v1/fleets', admin, { name: 'Limits Fleet' })).body.id as string
    const fleetBody = { client_name: 'dispatch', scope: 'fleet:read', fleet_id: fleet }
    expect((await api.post('/v1/oauth/clients', admin, fleetBody)).status).toBe(201)
    expect((await api.post('/v1/oauth/clients', admin, fleetBody)).status).toBe(201)
    const third = await api.post('/v1/oauth/clients', admin, fleetBody)
    expect(third.status).toBe(409)
    expect(third.body).toMatchObject({ code: 'limit_exceeded', limit: 2, resource: 'clients' })
    expect(third.body.client_secret).toBeUndefined()
    // pharmacyA already has the webhook test's client and one more fits; the fleet's count is its own.
    const fresh = (await api.pharmacy(admin)).id
    expect((await api.post('/v1/oauth/clients', admin, body(fresh))).status).toBe(201)
    expect((await api.post('/v1/oauth/clients', admin, { client_name: 'ops', scope: 'pharmacies:read' })).status).toBe(201)
    expect((await api.post('/v1/oauth/clients', admin, { client_name: 'ops', scope: 'pharmacies:read' })).status).toBe(201)
    expect((await api.post('/v1/oauth/clients', admin, { client_name: 'ops', scope: 'pharmacies:read' })).status).toBe(201)
  })

  it("refuses a tenant's third tote when two are allowed", async () => {
    const pharmacy = (await api.pharmacy(admin)).id
    const register = (serial: string) => api.post('/v1/totes', admin, { serial, pharmacy_id: pharmacy })
    expect((await register('LIMIT-1')).status).toBe(201)
    expect((await register('LIMIT-2')).status).toBe(201)
    const third = await register('LIMIT-3')
    expect(third.status).toBe(409)
    expect(third.body).toMatchObject({ code: 'limit_exceeded', limit: 2, resource: 'totes' })
    expect(third.body.mqtt).toBeUndefined()
    expect((await api.post('/v1/totes', admin, { serial: 'LIMIT-4', pharmacy_id: pharmacyB })).status).toBe(201)
  })

  it('holds the limit when many creations race', async () => {
    const pharmacy = (await api.pharmacy(admin)).id
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) => api.post('/v1/totes', admin, { serial: `RACE-${i}`, pharmacy_id: pharmacy })),
    )
    expect(answers.filter((r) => r.status === 201)).toHaveLength(2)
    expect(answers.filter((r) => r.status === 409)).toHaveLength(8)
  })
})

describe("a tenant's clients share one rate-limit bucket (RATE_LIMIT_TENANT_BURST=4)", () => {
  const clock = testClock()
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService(
      { RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '3', RATE_LIMIT_TENANT_RPS: '1', RATE_LIMIT_TENANT_BURST: '4' },
      { clock },
    )
  })
  afterAll(() => api.stop())

  it('throttles a second client of the tenant once the tenant has spent its burst; other tenants are untouched', async () => {
    const admin = await api.adminToken()
    const pharmacy = (await api.pharmacy(admin)).id
    const other = (await api.pharmacy(admin)).id
    clock.advance(60 * SECOND) // the admin's setup requests are forgotten
    const a = await pharmacyClient(api, admin, pharmacy, 'pharmacies:read')
    const b = await pharmacyClient(api, admin, pharmacy, 'pharmacies:read')
    const c = await pharmacyClient(api, admin, other, 'pharmacies:read')
    const read = (token: string) => api.get(`/v1/pharmacies`, token)

    const first = await read(a.token)
    expect(first.headers.get('ratelimit-policy')).toBe('"per-client";q=3;w=3, "per-tenant";q=4;w=4')
    expect(first.headers.get('ratelimit')).toBe('"per-client";r=2;t=1, "per-tenant";r=3;t=1')
    expect([(await read(a.token)).status, (await read(a.token)).status]).toEqual([200, 200])
    expect((await read(b.token)).status).toBe(200) // the tenant's fourth

    const throttled = await read(b.token) // b has 2 of its own left, the tenant none
    expect(throttled.status).toBe(429)
    expect(throttled.body).toMatchObject({ code: 'rate_limited' })
    expect(throttled.body.detail).toMatch(/tenant/)
    expect(throttled.headers.get('retry-after')).toBe('1')
    expect(throttled.headers.get('ratelimit')).toBe('"per-client";r=2;t=0, "per-tenant";r=0;t=1')

    expect((await read(c.token)).status).toBe(200) // another pharmacy has its own bucket
    clock.advance(SECOND)
    expect((await read(b.token)).status).toBe(200)
  })
})
