import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import { ADMIN, startTestService } from '../helpers/service.js'

/** The service listening on a real port: the throttles count the socket's address. */
async function listening(env: Record<string, string>) {
  const api = await startTestService(env, { clock: testClock() }) // a clock that stands still: no refill
  const { httpPort } = await api.service.start()
  const base = `http://127.0.0.1:${httpPort}`
  const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`
  const tokenRequest = (id: string, secret: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/oauth/token`, {
      method: 'POST',
      body: 'grant_type=client_credentials',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(id, secret), ...headers },
    })
  const bearer = (token: string, headers: Record<string, string> = {}) =>
    fetch(`${base}/v1/pharmacies`, { headers: { authorization: `Bearer ${token}`, ...headers } })
  return { api, base, tokenRequest, bearer }
}

// A well-formed JWT whose signature is wrong: it costs the service a signature check.
const forged = (n: number) => `eyJhbGciOiJFUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6IngifQ.eyJzdWIiOiJ4${n}In0.${'A'.repeat(86)}`

describe('/oauth/token is throttled per address (OAUTH_ADDRESS_BURST=3) and per client id (OAUTH_CLIENT_BURST=2)', () => {
  let s: Awaited<ReturnType<typeof listening>>
  beforeAll(async () => {
    s = await listening({ OAUTH_ADDRESS_RPS: '1', OAUTH_ADDRESS_BURST: '3', OAUTH_CLIENT_RPS: '1', OAUTH_CLIENT_BURST: '100' })
  })
  afterAll(() => s.api.stop())

  it("answers the address's fourth request 429 with Retry-After in OAuth's error format, whatever X-Forwarded-For says", async () => {
    for (let i = 0; i < 3; i++) expect((await s.tokenRequest(`cl_guess${i}`, 'wrong-secret')).status).toBe(401)
    const refused = await s.tokenRequest(ADMIN.id, ADMIN.secret) // right credentials, too late
    expect(refused.status).toBe(429)
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/)
    expect(await refused.json()).toMatchObject({ error: 'rate_limited' })
    // X-Forwarded-For is not trusted unless TRUST_PROXY is set: a made-up address changes nothing.
    expect((await s.tokenRequest(ADMIN.id, ADMIN.secret, { 'x-forwarded-for': '203.0.113.9' })).status).toBe(429)
  })
})

describe('per client id and, with TRUST_PROXY=true, per forwarded address', () => {
  let s: Awaited<ReturnType<typeof listening>>
  beforeAll(async () => {
    s = await listening({
      TRUST_PROXY: 'true',
      OAUTH_ADDRESS_RPS: '1',
      OAUTH_ADDRESS_BURST: '2',
      OAUTH_CLIENT_RPS: '1',
      OAUTH_CLIENT_BURST: '3',
    })
  })
  afterAll(() => s.api.stop())

  it('counts token requests naming one client id together, from however many addresses', async () => {
    const from = (n: number) => ({ 'x-forwarded-for': `198.51.100.7, 203.0.113.${n}` }) // the proxy appended the last entry
    expect((await s.tokenRequest(ADMIN.id, 'wrong', from(1))).status).toBe(401)
    expect((await s.tokenRequest(ADMIN.id, 'wrong', from(2))).status).toBe(401)
    expect((await s.tokenRequest(ADMIN.id, ADMIN.secret, from(3))).status).toBe(200)
    const refused = await s.tokenRequest(ADMIN.id, ADMIN.secret, from(4))
    expect(refused.status).toBe(429)
    expect(await refused.json()).toMatchObject({ error: 'rate_limited' })
    // Another client from the same addresses is not affected by the first one's count.
    const other = await s.api.service.clients.create({ client_name: 'other', scope: 'pharmacies:read' })
    expect((await s.tokenRequest(other.client_id, other.client_secret, from(4))).status).toBe(200)
    // …but each forwarded address has its own small allowance (2): the third from 203.0.113.4 is refused.
    expect((await s.tokenRequest(other.client_id, other.client_secret, from(4))).status).toBe(429)
  })
})

describe("invalid bearer tokens are counted against the caller's address (INVALID_TOKEN_BURST=3)", () => {
  let s: Awaited<ReturnType<typeof listening>>
  beforeAll(async () => {
    s = await listening({ INVALID_TOKEN_RPS: '1', INVALID_TOKEN_BURST: '3' })
  })
  afterAll(() => s.api.stop())

  it('answers 429 before checking another signature once the address has sent three invalid tokens; tokens already verified still work', async () => {
    const known = await s.api.adminToken()
    expect((await s.bearer(known)).status).toBe(200)
    const fresh = await s.api.adminToken() // valid, but never checked yet

    for (let i = 0; i < 3; i++) expect((await s.bearer(forged(i))).status).toBe(401)
    const refused = await s.bearer(forged(3))
    expect(refused.status).toBe(429)
    expect(refused.headers.get('content-type')).toBe('application/problem+json')
    expect(refused.headers.get('retry-after')).toBe('1')
    expect(await refused.json()).toMatchObject({ status: 429, code: 'rate_limited' })

    expect((await s.bearer(fresh)).status).toBe(429) // checking it would cost a signature check
    expect((await s.bearer(known)).status).toBe(200) // verified before: costs nothing to check again
  })
})
