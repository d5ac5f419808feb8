import canonicalize from 'canonicalize'
import { createHash } from 'node:crypto'
import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'

const GENESIS = `sha256:${'0'.repeat(64)}`
const sha = (value: unknown) => `sha256:${createHash('sha256').update(canonicalize(value)!).digest('hex')}`

type AuditRecord = {
  pos: number
  at: string
  jti: string | null
  client_id: string | null
  sub: string | null
  method: string
  path: string
  status: number
  request_id: string
  prev_hash: string
  hash: string
}

describe('the audit trail', () => {
  let api: TestApi
  let admin: string
  let auditor: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    auditor = await api.adminToken('audit:read')
  })
  afterAll(() => api.stop())

  async function allRecords(): Promise<AuditRecord[]> {
    const records: AuditRecord[] = []
    let cursor: string | null = null
    do {
      const page: { body: { data: AuditRecord[]; next_cursor: string | null } } = await api.get(
        `/v1/audit-events?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
        auditor,
      )
      records.push(...page.body.data)
      cursor = page.body.next_cursor
    } while (cursor)
    return records
  }

  it('records every authenticated request, whatever its outcome, in a chain anyone can recompute', async () => {
    const created = await api.request('POST', '/v1/pharmacies', {
      token: admin,
      headers: { 'x-request-id': 'audit-create-1' },
      body: { name: 'Audited', address: { line1: '1', city: 'c', region: 'r', postal_code: 'p', country: 'US' }, timezone: 'UTC' },
    })
    expect(created.status).toBe(201)
    await api.request('GET', '/v1/pharmacies/ph_01jd0000000000000000000000', {
      token: admin,
      headers: { 'x-request-id': 'audit-missing-1' },
    })
    await api.request('POST', '/v1/fleets', { token: auditor, headers: { 'x-request-id': 'audit-forbidden-1' }, body: { name: 'x' } })
    await api.request('GET', '/v1/pharmacies', { headers: { 'x-request-id': 'audit-anonymous-1' } }) // no token: nobody to attribute it to

    const records = await allRecords()
    const byRequest = (id: string) => records.find((r) => r.request_id === id)
    expect(byRequest('audit-create-1')).toMatchObject({
      method: 'POST',
      path: '/v1/pharmacies',
      status: 201,
      client_id: ADMIN.id,
      sub: ADMIN.id,
      jti: decodeJwt(admin).jti,
    })
    expect(byRequest('audit-missing-1')).toMatchObject({ method: 'GET', status: 404 })
    expect(byRequest('audit-forbidden-1')).toMatchObject({ method: 'POST', path: '/v1/fleets', status: 403, jti: decodeJwt(auditor).jti })
    expect(byRequest('audit-anonymous-1')).toBeUndefined()

    let head = GENESIS
    for (const { pos, hash, ...entry } of records) {
      expect(entry.prev_hash, `pos ${pos}`).toBe(head)
      expect(hash, `pos ${pos}`).toBe(sha(entry))
      expect(entry.at).toMatch(/Z$/)
      head = hash
    }
    expect(records.map((r) => r.pos)).toEqual([...records.map((r) => r.pos)].sort((x, y) => x - y))

    const verdict = await api.get('/v1/audit-events/verify', auditor)
    expect(verdict.status).toBe(200)
    expect(verdict.body).toMatchObject({ scope: 'deployment', valid: true, next_cursor: null })
    expect(verdict.body.checked).toBeGreaterThanOrEqual(records.length)
  })

  it('needs the audit:read scope', async () => {
    const res = await api.get('/v1/audit-events', await api.adminToken('pharmacies:read'))
    expect(res.status).toBe(403)
  })

  it('reports the first record edited in the database', async () => {
    const records = await allRecords()
    const victim = records[2]!
    await api.service.db.updateTable('audit_events').set({ status: 200 }).where('pos', '=', victim.pos).execute()
    const verdict = await api.get('/v1/audit-events/verify', auditor)
    expect(verdict.body).toMatchObject({ valid: false, first_bad_pos: victim.pos })
  })
})
