import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * A secret is shown once. The answer kept for an Idempotency-Key must not keep it for the key's
 * 24 h: the stored record holds the answer with each secret set to null, and a replay says which
 * fields it left out (`Idempotent-Replay-Redacted`, JSON Pointers).
 */

type Answer = { status: number; headers: Headers; text: string; body: any }

describe('answers that carry a secret, kept for an Idempotency-Key', () => {
  let api: TestApi
  let admin: string
  let baseUrl: string
  let pharmacyId: string

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    baseUrl = `http://127.0.0.1:${(await api.service.start()).httpPort}`
  })
  afterAll(() => api.stop())

  async function post(path: string, body: unknown, key: string): Promise<Answer> {
    const res = await fetch(baseUrl + path, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, headers: res.headers, text, body: JSON.parse(text) }
  }

  const at = (value: any, pointer: string) =>
    pointer
      .split('/')
      .slice(1)
      .reduce((v, name) => v?.[name], value)
  const withNull = (value: any, pointer: string) => {
    const copy = structuredClone(value)
    const names = pointer.split('/').slice(1)
    const last = names.pop()!
    names.reduce((v, name) => v[name], copy)[last] = null
    return copy
  }

  /** Sends the POST twice under one key: the first shows the secret, the stored record and the replay do not. */
  async function secretShownOnce(path: string, body: unknown, pointer: string, status: number) {
    const key = `secret-${Math.random()}`
    const first = await post(path, body, key)
    expect(first.status, first.text).toBe(status)
    const secret = at(first.body, pointer)
    expect(secret).toEqual(expect.stringMatching(/^\S{16,}$/))

    const stored = await api.service.db.selectFrom('idempotency_keys').selectAll().where('key', '=', key).executeTakeFirstOrThrow()
    expect(JSON.stringify(stored)).not.toContain(secret)

    const replay = await post(path, body, key)
    expect(replay.status).toBe(status)
    expect(replay.headers.get('idempotent-replayed')).toBe('true')
    expect(replay.headers.get('idempotent-replay-redacted')).toBe(pointer)
    expect(replay.text).not.toContain(secret)
    expect(replay.body).toEqual(withNull(first.body, pointer))
    return first.body
  }

  it('keeps no client secret: client registration and secret rotation', async () => {
    const client = await secretShownOnce(
      '/v1/oauth/clients',
      { client_name: 'kept-no-secret', scope: 'pharmacies:read' },
      '/client_secret',
      201,
    )
    await secretShownOnce(`/v1/oauth/clients/${client.client_id}/rotate-secret`, { overlap_s: 0 }, '/client_secret', 200)
  })

  it("keeps no tote's MQTT password", async () => {
    await secretShownOnce('/v1/totes', { serial: `SECRET-${Date.now()}`, pharmacy_id: pharmacyId }, '/mqtt/password', 201)
  })

  it('keeps no webhook signing secret: endpoint registration and secret rotation', async () => {
    const endpoint = await secretShownOnce(
      '/v1/webhooks',
      { url: 'http://127.0.0.1:9/hook', events: ['*'], pharmacy_id: pharmacyId },
      '/secret',
      201,
    )
    await secretShownOnce(`/v1/webhooks/${endpoint.id}/rotate-secret`, {}, '/secret', 200)
  })

  it("keeps no pharmacy's writeback secret", async () => {
    await secretShownOnce(
      '/v1/pharmacies',
      {
        name: 'Writeback Pharmacy',
        address: { line1: '2 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        writeback: { url: 'http://127.0.0.1:9/writeback' },
      },
      '/writeback/secret',
      201,
    )
  })

  it('replays an answer without a secret as it was, with no redaction header', async () => {
    const key = `plain-${Math.random()}`
    const first = await post('/v1/fleets', { name: 'No Secrets Couriers' }, key)
    const replay = await post('/v1/fleets', { name: 'No Secrets Couriers' }, key)
    expect(replay.text).toBe(first.text)
    expect(replay.headers.get('idempotent-replayed')).toBe('true')
    expect(replay.headers.get('idempotent-replay-redacted')).toBeNull()
  })
})
