import { sql } from 'kysely'
import pino from 'pino'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { SECOND, testClock } from '../helpers/clock.js'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'

describe('rate limiting (RATE_LIMIT_RPS=1, RATE_LIMIT_BURST=2)', () => {
  const clock = testClock()
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService({ RATE_LIMIT_RPS: '1', RATE_LIMIT_BURST: '2' }, { clock })
  })
  afterAll(() => api.stop())

  it('lets a burst through, then answers 429 rate_limited with Retry-After; every response carries RateLimit-Policy and RateLimit', async () => {
    const token = await api.adminToken()
    const first = await api.get('/v1/pharmacies', token)
    const second = await api.get('/v1/pharmacies/ph_01jd0000000000000000000000', token) // an error answer counts too
    const third = await api.get('/v1/pharmacies', token)
    expect([first.status, second.status, third.status]).toEqual([200, 404, 429])
    for (const res of [first, second, third]) {
      expect(res.headers.get('ratelimit-policy')).toBe('"per-client";q=2;w=2')
      expect(res.headers.get('ratelimit')).toMatch(/^"per-client";r=\d+;t=\d+$/)
    }
    expect(first.headers.get('ratelimit')).toMatch(/r=1;/)
    expect(second.headers.get('ratelimit')).toMatch(/r=0;/)
    expect(third.headers.get('content-type')).toBe('application/problem+json')
    expect(third.body).toMatchObject({ status: 429, code: 'rate_limited' })
    expect(third.headers.get('retry-after')).toBe('1')
    expect(third.headers.get('ratelimit')).toBe('"per-client";r=0;t=1')
    expect(third.headers.get('api-version')).toBe('v1')

    clock.advance(SECOND) // one token refilled
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)
    expect((await api.get('/v1/pharmacies', token)).status).toBe(429)
  })

  it('keeps one bucket per client, not per token', async () => {
    clock.advance(10 * SECOND)
    const a = await api.adminToken()
    const b = await api.adminToken('pharmacies:read')
    expect((await api.get('/v1/pharmacies', a)).status).toBe(200)
    expect((await api.get('/v1/pharmacies', b)).status).toBe(200)
    expect((await api.get('/v1/pharmacies', a)).status).toBe(429)

    const other = await api.service.clients.create({ client_name: 'other', scope: 'pharmacies:read' })
    const otherToken = await api.tokenFor(other.client_id, other.client_secret)
    expect((await api.get('/v1/pharmacies', otherToken)).status).toBe(200) // its own bucket is full
  })

  it('records throttled requests in the audit trail', async () => {
    clock.advance(10 * SECOND)
    const token = await api.adminToken()
    await api.request('GET', '/v1/pharmacies', { token, headers: { 'x-request-id': 'rl-1' } })
    await api.request('GET', '/v1/pharmacies', { token, headers: { 'x-request-id': 'rl-2' } })
    const throttled = await api.request('GET', '/v1/pharmacies', { token, headers: { 'x-request-id': 'rl-3' } })
    expect(throttled.status).toBe(429)
    await api.service.audit.flush()
    const rows = await api.service.db
      .selectFrom('audit_events')
      .select(['request_id', 'status', 'client_id'])
      .where('request_id', 'like', 'rl-%')
      .orderBy('pos')
      .execute()
    expect(rows).toEqual([
      { request_id: 'rl-1', status: 200, client_id: ADMIN.id },
      { request_id: 'rl-2', status: 200, client_id: ADMIN.id },
      { request_id: 'rl-3', status: 429, client_id: ADMIN.id },
    ])
  })
})

describe('an unexpected failure', () => {
  const lines: string[] = []
  let api: TestApi
  beforeAll(async () => {
    const sink = new Writable({ write: (chunk, _enc, done) => void (lines.push(String(chunk)), done()) })
    api = await startTestService({}, { logger: pino({ level: 'error' }, sink) })
  })
  afterAll(() => api.stop())

  it('answers a generic 500 problem with the request id, never a stack trace; the detail goes to the log', async () => {
    const token = await api.adminToken()
    await sql`drop table fleets`.execute(api.service.db) // the store breaks under the running service
    const res = await api.request('GET', '/v1/fleets', { token, headers: { 'x-request-id': 'boom-1' } })
    expect(res.status).toBe(500)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(Object.keys(res.body).sort()).toEqual(['code', 'detail', 'request_id', 'status', 'title', 'type'])
    expect(res.body).toMatchObject({ status: 500, code: 'internal', request_id: 'boom-1' })
    expect(res.text).not.toMatch(/fleets|sqlite|no such table|stack|\bat .*\.(ts|js)\b/i)
    expect(res.headers.get('x-request-id')).toBe('boom-1')
    expect(res.headers.get('api-version')).toBe('v1')

    const logged = lines.map((l) => JSON.parse(l)).find((l) => l.request_id === 'boom-1')
    expect(logged?.err?.message).toMatch(/no such table: fleets/)
  })
})

describe('headers on every response', () => {
  let api: TestApi
  let token: string
  beforeAll(async () => {
    api = await startTestService()
    token = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('echoes a sane X-Request-Id and carries API-Version: v1, on success, on errors and outside /v1', async () => {
    const form = new URLSearchParams({ grant_type: 'client_credentials' }).toString()
    const basic = `Basic ${Buffer.from(`${ADMIN.id}:${ADMIN.secret}`).toString('base64')}`
    const calls: [string, string, Parameters<TestApi['request']>[2]][] = [
      ['GET', '/v1/pharmacies', { token }],
      ['GET', '/v1/pharmacies', {}], // 401
      ['GET', '/v1/pharmacies/ph_01jd0000000000000000000000', { token }], // 404
      ['GET', '/v1/nothing-here', { token }], // unmatched
      ['POST', '/v1/pharmacies', { token, raw: '{', headers: { 'content-type': 'application/json' } }], // 400
      ['GET', '/healthz', {}],
      ['GET', '/readyz', {}],
      ['GET', '/v1/openapi.json', {}],
      ['GET', '/.well-known/jwks.json', {}],
      ['POST', '/oauth/token', { raw: form, headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic } }],
      ['GET', '/docs', {}],
    ]
    for (const [method, path, opts] of calls) {
      const id = `req-${method}-${path.length}-${Math.random().toString(36).slice(2, 8)}`
      const res = await api.request(method, path, { ...opts, headers: { ...opts?.headers, 'x-request-id': id } })
      expect(res.headers.get('x-request-id'), `${method} ${path}`).toBe(id)
      expect(res.headers.get('api-version'), `${method} ${path}`).toBe('v1')
      if (res.status >= 400) expect(res.body.request_id ?? id, `${method} ${path}`).toBe(id)
    }
  })

  it('replaces an unusable X-Request-Id with its own', async () => {
    const res = await api.request('GET', '/v1/pharmacies', { token, headers: { 'x-request-id': 'has spaces and "quotes"' } })
    expect(res.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{26}$/)
    const none = await api.get('/v1/pharmacies', token)
    expect(none.headers.get('x-request-id')).toMatch(/^req_[0-9a-z]{26}$/)
    expect(none.headers.get('x-request-id')).not.toBe(res.headers.get('x-request-id'))
  })
})
