import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

// Enough records that verifying them takes many chunks (the service yields between chunks).
const MANY = 12_000

/** Fills the audit log directly: the chain is built by the service's own AuditLog. */
async function recordMany(api: TestApi, n: number, clientId = 'cl_filler') {
  for (let i = 0; i < n; i++) {
    api.service.audit.record({
      jti: null,
      client_id: clientId,
      sub: clientId,
      method: 'GET',
      path: '/v1/pharmacies',
      status: 200,
      request_id: `fill-${i}`,
    })
  }
  await api.service.audit.flush()
}

describe('audit chain verification is paged, per tenant, and never holds the event loop', () => {
  let api: TestApi
  let admin: string
  let tenant: { id: string; token: string }
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    const pharmacy = (await api.pharmacy(admin)).id
    const client = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'pharmacy auditor',
        scope: 'audit:read pharmacies:read',
        pharmacy_id: pharmacy,
      })
    ).body
    tenant = { id: client.client_id, token: await api.tokenFor(client.client_id, client.client_secret) }
    await recordMany(api, 50)
  })
  afterAll(() => api.stop())

  it('gives a tenant its own records only: no deployment-wide verification, no deployment-wide count', async () => {
    for (let i = 0; i < 3; i++) expect((await api.get('/v1/pharmacies', tenant.token)).status).toBe(200)
    await api.service.audit.flush()
    const own = await api.service.db.selectFrom('audit_events').select('pos').where('client_id', '=', tenant.id).execute()

    const verdict = await api.get('/v1/audit-events/verify', tenant.token)
    expect(verdict.status).toBe(200)
    expect(verdict.body).toMatchObject({ scope: 'tenant', valid: true, checked: own.length, next_cursor: null })
    expect(verdict.body.length).toBeUndefined()

    const deployment = await api.get('/v1/audit-events/verify', admin)
    expect(deployment.body).toMatchObject({ scope: 'deployment', valid: true })
    expect(deployment.body.checked).toBeGreaterThan(own.length + 50)
  })

  it('answers one page at a time; following next_cursor covers the whole chain and finds a record edited in a later page', async () => {
    await api.service.audit.flush()
    const total = (await api.service.db.selectFrom('audit_events').select('pos').execute()).length
    const first = await api.get('/v1/audit-events/verify?limit=10', admin)
    expect(first.body).toMatchObject({ scope: 'deployment', valid: true, checked: 10 })
    expect(first.body.next_cursor).toEqual(expect.any(String))

    let checked = 0
    let cursor: string | null = null
    do {
      const page: { body: { valid: boolean; checked: number; next_cursor: string | null } } = await api.get(
        `/v1/audit-events/verify?limit=10${cursor ? `&cursor=${cursor}` : ''}`,
        admin,
      )
      expect(page.body.valid).toBe(true)
      checked += page.body.checked
      cursor = page.body.next_cursor
    } while (cursor)
    expect(checked).toBeGreaterThanOrEqual(total)

    const victim = await api.service.db
      .selectFrom('audit_events')
      .select('pos')
      .where('request_id', '=', 'fill-25')
      .executeTakeFirstOrThrow()
    await api.service.db.updateTable('audit_events').set({ status: 500 }).where('pos', '=', victim.pos).execute()
    const second = await api.get(`/v1/audit-events/verify?limit=20&cursor=${first.body.next_cursor}`, admin)
    expect(second.body).toMatchObject({ valid: false, first_bad_pos: victim.pos })
    await api.service.db.updateTable('audit_events').set({ status: 200 }).where('pos', '=', victim.pos).execute()
  })

  it('refuses a page larger than 10,000 records', async () => {
    const res = await api.get('/v1/audit-events/verify?limit=10001', admin)
    expect(res.status).toBe(422)
  })
})

describe('a long verification shares the event loop', () => {
  let api: TestApi
  let base: string
  let admin: string
  beforeAll(async () => {
    api = await startTestService()
    base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
    admin = await api.adminToken()
    await recordMany(api, MANY)
  })
  afterAll(() => api.stop())

  it('answers a request sent after the verification started before the verification finishes', async () => {
    const finished: string[] = []
    // The verification's first step is to flush the audit log: that is when the other request is sent.
    const audit = api.service.audit
    const flush = audit.flush.bind(audit)
    let other: Promise<void> | null = null
    audit.flush = () => {
      other ??= fetch(`${base}/healthz`).then(async (res) => {
        await res.text()
        finished.push(`healthz ${res.status}`)
      })
      return flush()
    }
    const verification = fetch(`${base}/v1/audit-events/verify?limit=10000`, { headers: { authorization: `Bearer ${admin}` } }).then(
      async (res) => {
        const body = await res.json()
        finished.push(`verify ${res.status} ${body.checked}`)
      },
    )
    await verification
    audit.flush = flush
    await other
    expect(finished).toEqual(['healthz 200', 'verify 200 10000'])
  })
})
