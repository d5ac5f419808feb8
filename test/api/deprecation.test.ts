import { createRoute, OpenAPIHono } from '@hono/zod-openapi'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRxtraceClient, type DeprecationNotice } from '@rxtrace/sdk'
import { deprecationHeaders } from '../../src/api/deprecation.js'
import type { AppEnv } from '../../src/api/env.js'
import { idParam, json, v1Route, z } from '../../src/api/openapi.js'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'

/**
 * No route is deprecated today: this suite declares one the way a route group would (v1Route with
 * a `deprecation`), mounts it on the service, and checks what clients see, the document included.
 */
const deprecation = {
  since: '2026-06-01T00:00:00Z',
  sunset: '2027-01-01T00:00:00Z',
  successor: '/v1/deliveries/{id}',
  notice: 'https://rxtrace.dev/changes/legacy-deliveries',
}

function legacyRoutes() {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/legacy-deliveries/{id}',
      operationId: 'getLegacyDelivery',
      summary: 'Read a delivery the old way',
      request: { params: idParam('dl') },
      responses: { 200: json(z.object({ id: z.string() }), 'The delivery, in short') },
      deprecation,
    }),
    (c) => c.json({ id: c.req.valid('param').id }, 200),
  )
  // Declared without our helpers: it still gets the answers every operation can give.
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/plain-route',
      operationId: 'getPlainRoute',
      summary: 'A route declared with createRoute alone',
      responses: { 200: json(z.object({ ok: z.boolean() }), 'OK') },
    }),
    (c) => c.json({ ok: true }, 200),
  )
  return app
}

describe('a deprecated route', () => {
  let api: TestApi
  let admin: string
  let base: string
  beforeAll(async () => {
    api = await startTestService()
    api.service.app.route('/', legacyRoutes()) // before the first request: the routes are fixed from then on
    admin = await api.adminToken()
    base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
  })
  afterAll(() => api?.stop())

  it('answers Deprecation (RFC 9745), Sunset (RFC 8594) and Link headers, on success and on refusal alike', async () => {
    const ok = await api.get('/v1/legacy-deliveries/dl_01jd0000000000000000000000', admin)
    expect(ok.status).toBe(200)
    expect(ok.headers.get('deprecation')).toBe(`@${Date.parse('2026-06-01T00:00:00Z') / 1000}`)
    expect(ok.headers.get('sunset')).toBe('Fri, 01 Jan 2027 00:00:00 GMT')
    expect(ok.headers.get('link')).toBe(
      '</v1/deliveries/{id}>; rel="successor-version", ' +
        '<https://rxtrace.dev/changes/legacy-deliveries>; rel="deprecation"; type="text/html", ' +
        '<https://rxtrace.dev/changes/legacy-deliveries>; rel="sunset"; type="text/html"',
    )
    const refused = await api.get('/v1/legacy-deliveries/dl_01jd0000000000000000000000', await api.adminToken('fleet:read'))
    expect(refused.status).toBe(403)
    expect(refused.headers.get('deprecation')).toBe(ok.headers.get('deprecation'))
    expect(refused.headers.get('sunset')).toBe(ok.headers.get('sunset'))

    const current = await api.get('/v1/fleets', admin)
    expect(current.status).toBe(200)
    expect(current.headers.get('deprecation')).toBeNull()
    expect(current.headers.get('sunset')).toBeNull()
  })

  it('is marked deprecated in the OpenAPI document, from the same declaration', async () => {
    const doc = (await api.request('GET', '/v1/openapi.json')).body
    const legacy = doc.paths['/v1/legacy-deliveries/{id}'].get
    expect(legacy.deprecated).toBe(true)
    expect(legacy.description).toContain('2027-01-01')
    expect(legacy.description).toContain('/v1/deliveries/{id}')
    expect(Object.keys(legacy.responses['200'].headers)).toEqual(expect.arrayContaining(['Deprecation', 'Sunset', 'Link']))
    expect(doc.paths['/v1/deliveries/{id}'].get.deprecated).toBeUndefined()
  })

  it('gives a route declared with createRoute alone the answers of the middleware in the document', async () => {
    const doc = (await api.request('GET', '/v1/openapi.json')).body
    const statuses = Object.keys(doc.paths['/v1/plain-route'].get.responses)
    expect(statuses).toEqual(expect.arrayContaining(['200', '401', '403', '405', '422', '429', '500', '503']))
  })

  it('is reported once per operation by the SDK', async () => {
    const notices: DeprecationNotice[] = []
    const rx = createRxtraceClient({
      baseUrl: base,
      auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret },
      onDeprecated: (notice) => notices.push(notice),
    })
    const legacy = (id: string) => (rx.api.GET as any)('/v1/legacy-deliveries/{id}', { params: { path: { id } } })
    await legacy('dl_01jd0000000000000000000001')
    await legacy('dl_01jd0000000000000000000002')
    await rx.api.GET('/v1/fleets')
    expect(notices).toEqual([
      {
        method: 'GET',
        url: `${base}/v1/legacy-deliveries/dl_01jd0000000000000000000001`,
        deprecation: '@1780272000',
        sunset: 'Fri, 01 Jan 2027 00:00:00 GMT',
        link: expect.stringContaining('rel="successor-version"'),
      },
    ])
  })

  it('refuses a declaration whose sunset comes less than six months after it', () => {
    expect(() => deprecationHeaders({ since: '2026-06-01T00:00:00Z', sunset: '2026-09-01T00:00:00Z' })).toThrow(/six months/)
    expect(() => deprecationHeaders({ since: 'soon', sunset: '2027-01-01T00:00:00Z' })).toThrow(/RFC 3339/)
  })
})
