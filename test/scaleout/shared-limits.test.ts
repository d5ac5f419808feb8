import { afterAll, afterEach, describe, expect, it } from 'vitest'
import { allScopes } from '../../src/auth/scopes.js'
import { authorizeUrl, browser, pkce } from '../helpers/browser.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'

/**
 * The documented limits hold for the deployment, not per copy: two copies of the service on one
 * PostgreSQL count sign-in failures, OAuth requests and API requests in the shared store, so
 * spreading requests over both copies gets no more than one copy would allow.
 */
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the shared-limits suite: ${reasons.join('; ')}`)

const schemas = postgresSchemas(url ?? 'postgres://unreachable')
const running: TestApi[] = []
afterEach(async () => {
  for (const copy of running.splice(0)) await copy.stop()
})
afterAll(() => schemas.drop())

// A refill so slow that none happens during a test: what passes is the burst alone.
const NO_REFILL = '0.0001'

async function twoCopies(env: Record<string, string>) {
  const schema = await schemas.create()
  const copies: TestApi[] = []
  for (let i = 0; i < 2; i++) {
    const api = await startTestService(
      { PASSWORD_SCRYPT_LOG2_N: '10', ...env },
      { store: { kind: 'postgres', url: url!, schema }, sink: undefined },
    )
    running.push(api)
    copies.push(api)
  }
  return copies as [TestApi, TestApi]
}

/** A client of `scope`, registered through `api`, with its secret. */
async function client(api: TestApi, admin: string, body: Record<string, unknown> = {}) {
  const res = await api.post('/v1/oauth/clients', admin, { client_name: 'measured', scope: 'pharmacies:read', ...body })
  expect(res.status, res.text).toBe(201)
  return res.body as { client_id: string; client_secret: string }
}

const statusesOf = (replies: { status: number }[]) => replies.map((r) => r.status)
const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length

describe.skipIf(!url)('limits shared by two copies on one PostgreSQL', () => {
  it("holds a client's API requests to its burst, spread over both copies", async () => {
    const copies = await twoCopies({ RATE_LIMIT_RPS: NO_REFILL, RATE_LIMIT_BURST: '10' })
    const admin = await copies[0].adminToken()
    const measured = await client(copies[0], admin)
    const token = await copies[0].tokenFor(measured.client_id, measured.client_secret)
    const statuses: number[] = []
    for (let i = 0; i < 20; i++) statuses.push((await copies[i % 2]!.get('/v1/pharmacies', token)).status)
    expect(count(statuses, 200)).toBe(10)
    expect(count(statuses, 429)).toBe(10)
    expect(statuses.slice(10)).toEqual(Array(10).fill(429))
  })

  it("holds a tenant's clients together to the tenant's burst, spread over both copies", async () => {
    const copies = await twoCopies({ RATE_LIMIT_TENANT_RPS: NO_REFILL, RATE_LIMIT_TENANT_BURST: '8' })
    const admin = await copies[0].adminToken()
    const pharmacy = await copies[0].pharmacy(admin)
    const tokens = []
    for (let i = 0; i < 2; i++) {
      const c = await client(copies[0], admin, { pharmacy_id: pharmacy.id })
      tokens.push(await copies[0].tokenFor(c.client_id, c.client_secret))
    }
    const statuses: number[] = []
    for (let i = 0; i < 16; i++) statuses.push((await copies[i % 2]!.get(`/v1/pharmacies/${pharmacy.id}`, tokens[(i >> 1) % 2]!)).status)
    expect(count(statuses, 200)).toBe(8)
    const refused = await copies[1].get(`/v1/pharmacies/${pharmacy.id}`, tokens[0]!)
    expect(refused.status).toBe(429)
    expect(refused.body.detail).toContain('clients of this tenant')
  })

  it("holds one client's token requests to its burst, spread over both copies", async () => {
    const copies = await twoCopies({ OAUTH_CLIENT_RPS: NO_REFILL, OAUTH_CLIENT_BURST: '4' })
    const admin = await copies[0].adminToken()
    const measured = await client(copies[0], admin)
    const basic = `Basic ${Buffer.from(`${measured.client_id}:${measured.client_secret}`).toString('base64')}`
    const replies = []
    for (let i = 0; i < 8; i++) {
      replies.push(
        await copies[i % 2]!.request('POST', '/oauth/token', {
          raw: 'grant_type=client_credentials',
          headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic },
        }),
      )
    }
    expect(statusesOf(replies)).toEqual([200, 200, 200, 200, 429, 429, 429, 429])
    expect(replies[4]!.body.error).toBe('rate_limited')
  })

  it("holds one address's OAuth requests to its burst, spread over both copies", async () => {
    const copies = await twoCopies({ OAUTH_ADDRESS_RPS: NO_REFILL, OAUTH_ADDRESS_BURST: '6' })
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) statuses.push((await browser(copies[i % 2]!.service, '198.51.100.9').get('/oauth/authorize')).status)
    expect(count(statuses, 429)).toBe(6)
    expect(statuses.slice(6)).toEqual(Array(6).fill(429))
    // Another address is counted on its own.
    expect((await browser(copies[1].service, '198.51.100.10').get('/oauth/authorize')).status).not.toBe(429)
  })

  describe('failed sign-ins', () => {
    async function world() {
      const copies = await twoCopies({})
      const admin = await copies[0].adminToken()
      const pharmacy = await copies[0].pharmacy(admin)
      const emails = ['one@example.com', 'two@example.com']
      for (const email of emails) {
        const res = await copies[0].post('/v1/users', admin, {
          email,
          name: 'Pat',
          role: 'technician',
          pharmacy_id: pharmacy.id,
          password: 'the right long password',
        })
        expect(res.status, res.text).toBe(201)
      }
      const app = await copies[0].post('/v1/oauth/clients', admin, {
        client_name: 'Console',
        token_endpoint_auth_method: 'none',
        redirect_uris: ['https://console.example/callback'],
        first_party: true,
        scope: allScopes.join(' '),
      })
      expect(app.status, app.text).toBe(201)
      /** One sign-in attempt through `copy` from `address`: the page's status. */
      const attempt = async (copy: TestApi, address: string, email: string, password: string) => {
        const b = browser(copy.service, address)
        const params = { client_id: app.body.client_id, redirect_uri: 'https://console.example/callback', code_challenge: pkce().challenge }
        const form = await b.get(authorizeUrl(params))
        expect(form.status).toBe(200)
        return (await b.post('/oauth/authorize', { ...form.form, email, password })).status
      }
      return { copies, emails, attempt }
    }

    it('hold an account to 5 failures in 15 minutes, spread over both copies and addresses', async () => {
      const { copies, emails, attempt } = await world()
      const failed = []
      for (let i = 0; i < 5; i++) failed.push(await attempt(copies[i % 2]!, `198.51.100.${20 + i}`, emails[0]!, 'a wrong password!'))
      expect(failed).toEqual([401, 401, 401, 401, 401])
      // Even the right password waits now, on either copy, from a new address.
      expect(await attempt(copies[1], '198.51.100.40', emails[0]!, 'the right long password')).toBe(429)
      expect(await attempt(copies[0], '198.51.100.41', emails[0]!, 'the right long password')).toBe(429)
      // The other account is not held.
      expect(await attempt(copies[1], '198.51.100.42', emails[1]!, 'the right long password')).toBe(303)
    })

    it('hold an address to 5 failures in 15 minutes, spread over both copies and accounts', async () => {
      const { copies, emails, attempt } = await world()
      const failed = []
      for (let i = 0; i < 5; i++) failed.push(await attempt(copies[i % 2]!, '198.51.100.60', `nobody${i}@example.com`, 'a wrong password!'))
      expect(failed).toEqual([401, 401, 401, 401, 401])
      expect(await attempt(copies[1], '198.51.100.60', emails[1]!, 'the right long password')).toBe(429)
      expect(await attempt(copies[0], '198.51.100.60', emails[1]!, 'the right long password')).toBe(429)
      expect(await attempt(copies[0], '198.51.100.61', emails[1]!, 'the right long password')).toBe(303)
    })
  })
})
