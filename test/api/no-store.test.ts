import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN, startTestService, type Reply, type TestApi } from '../helpers/service.js'

type Schema = { $ref?: string; properties?: Record<string, Schema>; items?: Schema; allOf?: Schema[]; anyOf?: Schema[]; oneOf?: Schema[] }
type Doc = {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: Schema }> }> }>>
  components: { schemas: Record<string, Schema> }
}

/** Member names that hold a secret in an answer. */
const SECRET_MEMBER = /^(secret|client_secret|password|access_token|refresh_token)$/

/** Whether a response schema has a secret-holding member anywhere in it. */
function holdsSecret(doc: Doc, schema: Schema | undefined, seen = new Set<string>()): boolean {
  if (!schema) return false
  if (schema.$ref) {
    if (seen.has(schema.$ref)) return false
    seen.add(schema.$ref)
    return holdsSecret(doc, doc.components.schemas[schema.$ref.split('/').pop()!], seen)
  }
  for (const [name, member] of Object.entries(schema.properties ?? {}))
    if (SECRET_MEMBER.test(name) || holdsSecret(doc, member, seen)) return true
  return [schema.items, ...(schema.allOf ?? []), ...(schema.anyOf ?? []), ...(schema.oneOf ?? [])].some((s) => holdsSecret(doc, s, seen))
}

describe('answers that carry a secret are not kept by any cache', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string

  /** Every route that answers with a secret, and a request that gets one from it. */
  const secretBearing: Record<string, () => Promise<Reply>> = {
    'POST /v1/oauth/clients': () => api.post('/v1/oauth/clients', admin, { client_name: 'Dispatch desk', scope: 'deliveries:read' }),
    'POST /v1/oauth/clients/{id}/rotate-secret': async () => {
      const created = await api.post('/v1/oauth/clients', admin, { client_name: 'Rotating', scope: 'deliveries:read' })
      return api.post(`/v1/oauth/clients/${created.body.client_id}/rotate-secret`, admin, {})
    },
    'POST /v1/totes': () => api.post('/v1/totes', admin, { serial: `T-${Math.random().toString(36).slice(2)}`, pharmacy_id: pharmacyId }),
    'POST /v1/webhooks': () => api.post('/v1/webhooks', admin, { url: 'http://127.0.0.1:9/hooks', events: ['*'] }),
    'POST /v1/webhooks/{id}/rotate-secret': async () => {
      const created = await api.post('/v1/webhooks', admin, { url: 'http://127.0.0.1:9/rotating', events: ['*'] })
      return api.post(`/v1/webhooks/${created.body.id}/rotate-secret`, admin)
    },
    'POST /v1/pharmacies': () =>
      api.post('/v1/pharmacies', admin, {
        name: 'Writeback Pharmacy',
        address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: 'http://127.0.0.1:9/outcomes' },
      }),
    'POST /oauth/token': async () => {
      const res = await api.service.app.request('/oauth/token', {
        method: 'POST',
        body: 'grant_type=client_credentials',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${ADMIN.id}:${ADMIN.secret}`).toString('base64')}`,
        },
      })
      const text = await res.text()
      return { status: res.status, body: JSON.parse(text), headers: res.headers, text }
    },
  }

  /** Routes that answer with the creation's schema, whose secret member is left out after creation. */
  const secretOnlyAtCreation: Record<string, () => Promise<Reply>> = {
    'GET /v1/pharmacies': () => api.get('/v1/pharmacies', admin),
    'GET /v1/pharmacies/{id}': () => api.get(`/v1/pharmacies/${pharmacyId}`, admin),
    'PATCH /v1/pharmacies/{id}': () =>
      api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, { token: admin, body: { escalate_after_s: 600 } }),
  }

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
  })
  afterAll(() => api.stop())

  it('lists every route whose documented answer holds a secret', async () => {
    const doc = (await api.get('/v1/openapi.json', admin)).body as Doc
    const documented: string[] = []
    for (const [path, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        const answers = Object.entries(operation.responses).filter(([status]) => status.startsWith('2'))
        if (answers.some(([, r]) => Object.values(r.content ?? {}).some((c) => holdsSecret(doc, c.schema))))
          documented.push(`${method.toUpperCase()} ${path}`)
      }
    }
    expect(documented.sort()).toEqual([...Object.keys(secretBearing), ...Object.keys(secretOnlyAtCreation)].sort())
  })

  it.each(Object.entries(secretOnlyAtCreation))(
    '%s shares its schema with the creation answer but never holds the secret, and is no-store anyway',
    async (_route, call) => {
      const res = await call()
      expect(res.status, res.text).toBe(200)
      expect(res.text).not.toMatch(/"secret"/)
      expect(res.headers.get('cache-control')).toBe('no-store')
    },
  )

  it.each(Object.keys(secretBearing))('%s answers with Cache-Control: no-store', async (route) => {
    const res = await secretBearing[route]!()
    expect(res.status, res.text).toBeLessThan(300)
    expect(res.text).toMatch(/"(secret|client_secret|password|access_token)":"[^"]+"/)
    expect(res.headers.get('cache-control')).toBe('no-store')
    // RFC 6749 §5.1: the token endpoint also sends Pragma: no-cache.
    if (route === 'POST /oauth/token') expect(res.headers.get('pragma')).toBe('no-cache')
  })

  it('keeps no-store on the refusals and replays of those routes', async () => {
    const refused = await api.post('/v1/webhooks', admin, { url: 'not a url', events: ['*'] })
    expect(refused.status).toBe(422)
    expect(refused.headers.get('cache-control')).toBe('no-store')
    const body = { client_name: 'Replayed', scope: 'deliveries:read' }
    const first = await api.post('/v1/oauth/clients', admin, body, { 'idempotency-key': 'no-store-replay' })
    const replay = await api.post('/v1/oauth/clients', admin, body, { 'idempotency-key': 'no-store-replay' })
    expect([first.status, replay.headers.get('idempotent-replayed')]).toEqual([201, 'true'])
    expect(replay.headers.get('cache-control')).toBe('no-store')
    const badClient = await api.service.app.request('/oauth/token', {
      method: 'POST',
      body: 'grant_type=client_credentials&client_id=x&client_secret=y',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    })
    expect(badClient.status).toBe(401)
    expect([badClient.headers.get('cache-control'), badClient.headers.get('pragma')]).toEqual(['no-store', 'no-cache'])
  })
})
