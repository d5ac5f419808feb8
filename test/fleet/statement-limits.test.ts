import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * An operator's statement at the edges of its limits: the body limit of 4 MiB, and a statement
 * of nothing but malformed lines, whose answer must not grow with it.
 */
describe('statement limits', () => {
  let api: TestApi
  let admin: string
  let path: string
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    const fleet = (await api.post('/v1/fleets', admin, { name: 'Statement Couriers' })).body as { id: string }
    path = `/v1/fleets/${fleet.id}/reconciliation?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z`
  })
  afterAll(() => api.stop())

  const post = (raw: string) => api.request('POST', path, { token: admin, raw, headers: { 'content-type': 'application/x-ndjson' } })
  const LIMIT = 4 * 1024 * 1024

  it('reads a 4 MiB statement of two million malformed lines and answers with the first 100 and the count of the rest', async () => {
    const statement = 'x\n'.repeat(LIMIT / 2) // exactly the limit
    const res = await post(statement)
    expect(res.status).toBe(422)
    expect(res.body.code).toBe('validation_failed')
    expect(res.body.detail).toBe(`The statement has ${LIMIT / 2} malformed line(s); nothing was compared.`)
    expect(res.body.errors).toHaveLength(100)
    expect(res.body.errors[0]).toEqual({ pointer: '/lines/1', message: 'is not a JSON object' })
    expect(res.body.errors[99]).toEqual({ pointer: '/lines/100', message: 'is not a JSON object' })
    expect(res.body.errors_omitted).toBe(LIMIT / 2 - 100)
    expect(res.text.length).toBeLessThan(16 * 1024)
  }, 60_000)

  it('refuses a statement one byte over 4 MiB with 413', async () => {
    const res = await post(`${'x\n'.repeat(LIMIT / 2)}x`)
    expect(res.status).toBe(413)
    expect(res.body.code).toBe('payload_too_large')
  }, 60_000)

  it('names every bad line of a statement with fewer than 100, and no count', async () => {
    const res = await post(
      ['{"delivery_id":"dl_1","payout_cents":5}', 'nope', '{not json}', '[1]', '{"delivery_id":"dl_1","payout_cents":5}'].join('\r\n'),
    )
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([
      { pointer: '/lines/2', message: 'is not a JSON object' },
      { pointer: '/lines/3', message: 'is not valid JSON' },
      { pointer: '/lines/4', message: 'is not a JSON object' },
      { pointer: '/lines/5', message: 'dl_1 is already on line 1' },
    ])
    expect(res.body).not.toHaveProperty('errors_omitted')
  })
})
