import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRxtraceClient, type DeprecationNotice } from '@rxtrace/sdk'
import { legacyRoutes } from '../../test/helpers/legacy-routes.js'
import { ADMIN } from './service.js'
import { startTestService, type TestApi } from '../../test/helpers/service.js'

describe('the SDK and a deprecated operation', () => {
  let api: TestApi
  let base: string
  beforeAll(async () => {
    api = await startTestService()
    api.service.app.route('/', legacyRoutes()) // before the first request: the routes are fixed from then on
    base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
  })
  afterAll(() => api?.stop())

  it('reports it once per operation through onDeprecated', async () => {
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
})
