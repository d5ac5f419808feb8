import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN, startTestService } from '../helpers/service.js'

/** A wrong method on a path that exists is 405 with `Allow` (RFC 9110 §15.5.6); an unknown path stays 404. */
describe('wrong method on an existing path', () => {
  let api: Awaited<ReturnType<typeof startTestService>>
  let token: string
  beforeAll(async () => {
    api = await startTestService()
    token = await api.tokenFor(ADMIN.id, ADMIN.secret)
  })
  afterAll(() => api.service.stop())

  for (const [method, path, allow] of [
    ['DELETE', '/v1/pharmacies', 'GET, HEAD, POST'],
    ['PUT', '/v1/deliveries/dl_01jd0000000000000000000000', 'GET, HEAD'],
    ['GET', '/v1/deliveries/dl_01jd0000000000000000000000/dispatch', 'POST'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['POST', '/docs/assets/init.js', 'GET, HEAD'],
  ] as const) {
    it(`${method} ${path} → 405 method_not_allowed, Allow: ${allow}`, async () => {
      const res = await api.request(method, path, { token })
      expect(res.status).toBe(405)
      expect(res.headers.get('allow')).toBe(allow)
      expect(res.headers.get('content-type')).toBe('application/problem+json')
      expect(res.body).toMatchObject({
        status: 405,
        code: 'method_not_allowed',
        title: 'Method Not Allowed',
        request_id: expect.any(String),
      })
    })
  }

  it('an unknown path is still 404 not_found', async () => {
    const res = await api.request('GET', '/v1/no-such-thing', { token })
    expect(res.status).toBe(404)
    expect(res.body).toMatchObject({ code: 'not_found' })
  })

  it("a route's own not-found (an unknown file under /docs/assets/) stays 404", async () => {
    expect((await api.request('GET', '/docs/assets/nope.js')).status).toBe(404)
  })

  it('without a token, /v1 still asks for one first', async () => {
    const res = await api.request('DELETE', '/v1/pharmacies')
    expect(res.status).toBe(401)
  })
})
