import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { deprecationHeaders } from '../../src/api/deprecation.js'
import { legacyRoutes } from '../helpers/legacy-routes.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * No route is deprecated today: this suite mounts one declared the way a route group would
 * (test/helpers/legacy-routes.ts) and checks what clients see, the document included.
 */

describe('a deprecated route', () => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService()
    api.service.app.route('/', legacyRoutes()) // before the first request: the routes are fixed from then on
    admin = await api.adminToken()
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

  it('refuses a declaration whose sunset comes less than six months after it', () => {
    expect(() => deprecationHeaders({ since: '2026-06-01T00:00:00Z', sunset: '2026-09-01T00:00:00Z' })).toThrow(/six months/)
    expect(() => deprecationHeaders({ since: 'soon', sunset: '2027-01-01T00:00:00Z' })).toThrow(/RFC 3339/)
  })
})
