import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

/** Products by NDC and their versioned stability data, over the API as a pharmacy and an operator use them. */

const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [
    { min_c: 8, max_c: 25, allowed_s: 86_400 },
    { min_c: 0, max_c: 2, allowed_s: 3600 },
  ],
  freeze_thaw_max: 0,
  hard_min_c: -0.5,
  source: 'Prescribing information 16.2',
}

describe('products', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string
  let mine: string
  let theirs: string
  let readOnly: string

  async function restricted(scope: string, pharmacy_id: string): Promise<string> {
    const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, pharmacy_id })
    expect(res.status, res.text).toBe(201)
    return api.tokenFor(res.body.client_id, res.body.client_secret)
  }
  const product = (token: string, body: Record<string, unknown>) =>
    api.post('/v1/products', token, { ndc: '0002-8215-01', name: 'Insulin lispro 10 mL', stability: STABILITY, ...body })
  const countProducts = async () => (await api.get('/v1/products?limit=100', admin)).body.data.length

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    const otherId = (await api.pharmacy(admin)).id
    mine = await restricted('products:write prescriptions:read', pharmacyId)
    theirs = await restricted('products:write prescriptions:read', otherId)
    readOnly = await restricted('prescriptions:read', pharmacyId)
  })
  afterAll(() => api.stop())

  it('registers a pharmacy’s product with its NDC in the 11-digit 5-4-2 form, version 1 in force', async () => {
    const res = await product(mine, { ndc: '0002-8215-01' })
    expect(res.status, res.text).toBe(201)
    expect(res.body).toMatchObject({ ndc: '00002-8215-01', pharmacy_id: pharmacyId, version: 1, stability: STABILITY })
    expect(res.body.id).toMatch(/^pr_/)
    const got = await api.get(`/v1/products/${res.body.id}`, readOnly)
    expect(got.status).toBe(200)
    expect(got.body).toEqual(res.body)
  })

  it.each([
    ['5-3-2', '12345-678-90', '12345-0678-90'],
    ['5-4-1', '12345-6789-0', '12345-6789-00'],
    ['11 digits without dashes', '12345678901', '12345-6789-01'],
  ])('normalises an NDC given as %s', async (_shape, given, stored) => {
    const res = await product(admin, { ndc: given, pharmacy_id: null })
    expect(res.status, res.text).toBe(201)
    expect(res.body.ndc).toBe(stored)
    const found = await api.get(`/v1/products?ndc=${stored.replaceAll('-', '')}`, mine)
    expect(found.body.data.map((p: { id: string }) => p.id)).toContain(res.body.id)
  })

  it('refuses bad stability data with 422 and a pointer per problem, storing nothing', async () => {
    const before = await countProducts()
    const cases: [Record<string, unknown>, string][] = [
      [{ ndc: '0002821501' }, '/ndc'], // ten digits without dashes: which segment to pad is unknowable
      [{ ndc: '002-8215-01' }, '/ndc'],
      [{ stability: { ...STABILITY, budgets: [{ min_c: 7, max_c: 12, allowed_s: 60 }] } }, '/stability/budgets/0'],
      [
        {
          stability: {
            ...STABILITY,
            budgets: [
              { min_c: 8, max_c: 15, allowed_s: 60 },
              { min_c: 12, max_c: 25, allowed_s: 60 },
            ],
          },
        },
        '/stability/budgets/1',
      ],
      [
        { stability: { ...STABILITY, budgets: Array.from({ length: 7 }, (_, i) => ({ min_c: 8 + i, max_c: 9 + i, allowed_s: 60 })) } },
        '/stability/budgets',
      ],
      [{ stability: { ...STABILITY, budgets: [{ min_c: 8, max_c: 12, allowed_s: -1 }] } }, '/stability/budgets/0/allowed_s'],
      [{ stability: { ...STABILITY, budgets: [] } }, '/stability/budgets'],
      [{ stability: { ...STABILITY, source: 'x'.repeat(501) } }, '/stability/source'],
    ]
    for (const [body, pointer] of cases) {
      const res = await product(mine, { ndc: '11111-2222-33', ...body })
      expect(res.status, JSON.stringify(body)).toBe(422)
      expect(res.headers.get('content-type')).toContain('application/problem+json')
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer)
    }
    expect(await countProducts()).toBe(before)
  })

  it('keeps the walls: another pharmacy’s product is not found, and only an operator registers every pharmacy’s', async () => {
    const own = (await product(mine, { ndc: '22222-3333-44' })).body
    expect((await api.get(`/v1/products/${own.id}`, theirs)).status).toBe(404)
    const put = await api.request('PUT', `/v1/products/${own.id}/stability`, { token: theirs, body: { stability: STABILITY } })
    expect(put.status).toBe(404)
    expect((await product(theirs, { ndc: '33333-4444-55', pharmacy_id: pharmacyId })).status).toBe(404)
    expect((await product(mine, { ndc: '33333-4444-55', pharmacy_id: null })).status).toBe(403)
    expect((await product(readOnly, { ndc: '33333-4444-55' })).status).toBe(403)
    const listed = await api.get('/v1/products?limit=100', theirs)
    expect(listed.body.data.map((p: { id: string }) => p.id)).not.toContain(own.id)
  })

  it('adds stability versions, never edits one, and shows every version oldest first', async () => {
    const created = (await product(mine, { ndc: '44444-5555-66' })).body
    const longer = { ...STABILITY, budgets: [{ min_c: 8, max_c: 25, allowed_s: 172_800 }] }
    const v2 = await api.request('PUT', `/v1/products/${created.id}/stability`, { token: mine, body: { stability: longer, version: 1 } })
    expect(v2.status, v2.text).toBe(201)
    expect(v2.body).toMatchObject({ product_id: created.id, version: 2, stability: longer })

    // Editing an old version: refused, nothing stored.
    const stale = await api.request('PUT', `/v1/products/${created.id}/stability`, {
      token: mine,
      body: { stability: STABILITY, version: 1 },
    })
    expect(stale.status).toBe(422)
    expect(stale.body.errors[0].pointer).toBe('/version')
    const overlapping = { ...STABILITY, budgets: [{ min_c: 5, max_c: 25, allowed_s: 60 }] }
    const bad = await api.request('PUT', `/v1/products/${created.id}/stability`, { token: mine, body: { stability: overlapping } })
    expect(bad.status).toBe(422)
    expect(bad.body.errors[0].pointer).toBe('/stability/budgets/0')

    const versions = await api.get(`/v1/products/${created.id}/stability/versions`, readOnly)
    expect(versions.body.data.map((v: { version: number }) => v.version)).toEqual([1, 2])
    expect(versions.body.data[0].stability).toEqual(STABILITY)
    expect((await api.get(`/v1/products/${created.id}`, readOnly)).body).toMatchObject({ version: 2, stability: longer })
  })

  it('refuses a second product for the same NDC and owner', async () => {
    expect((await product(mine, { ndc: '55555-6666-77' })).status).toBe(201)
    expect((await product(mine, { ndc: '55555-6666-77' })).status).toBe(409)
  })
})
