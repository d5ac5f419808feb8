import canonicalize from 'canonicalize'
import { createHash } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { PASSWORD, REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

type Page = { data: { sub: string | null; client_id: string | null; pharmacy_id?: string; pos?: number }[]; next_cursor: string | null }

/**
 * The audit log is read by tenant: a pharmacist sees the records of their own pharmacy, whoever
 * made them and through whichever app, and none of another pharmacy's, even when both pharmacies'
 * people sign in through the same app.
 */
describe('audit records by tenant', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let pat: string
  let bo: { id: string; token: string }
  let pharmacyB: { id: string }
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
    pharmacyB = await api.pharmacy(world.admin, { name: 'Elm Street Pharmacy' })
    const boUser = (
      await api.post('/v1/users', world.admin, {
        email: 'bo@example.com',
        name: 'Bo of Elm Street',
        role: 'pharmacist',
        pharmacy_id: pharmacyB.id,
        password: PASSWORD,
      })
    ).body
    pat = await userToken('pat@example.com')
    bo = { id: boUser.id, token: await userToken('bo@example.com') }
  })
  afterAll(() => api.stop())

  /** Signs a person in through the shared first-party console client. */
  async function userToken(email: string): Promise<string> {
    const { verifier, challenge } = pkce()
    const done = await signIn(
      browser(api.service),
      { client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: challenge },
      email,
    )
    const res = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code: done.location!.searchParams.get('code')!,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: world.client.client_id,
    })
    expect(res.status).toBe(200)
    return res.body.access_token
  }

  async function everything(token: string): Promise<Page['data']> {
    const records: Page['data'] = []
    let cursor: string | null = null
    do {
      const page: { status: number; body: Page } = await api.get(`/v1/audit-events?limit=3${cursor ? `&cursor=${cursor}` : ''}`, token)
      expect(page.status).toBe(200)
      records.push(...page.body.data)
      cursor = page.body.next_cursor
    } while (cursor)
    return records
  }

  it("an Idempotency-Key is the person's, not the app's: another pharmacy's pharmacist using the same key gets their own prescription", async () => {
    // The same body from both: neither names a pharmacy, so each defaults to the person's own.
    const body = { patient_id: 'pt_same_ref', cold_chain: false }
    const headers = { 'idempotency-key': 'order-1001' }
    const first = await api.request('POST', '/v1/prescriptions', { token: pat, body, headers })
    expect(first.status, first.text).toBe(201)
    const other = await api.request('POST', '/v1/prescriptions', { token: bo.token, body, headers })
    expect(other.status, other.text).toBe(201)
    expect(other.headers.get('idempotent-replayed')).toBeNull()
    expect(other.body.pharmacy_id).toBe(pharmacyB.id)
    expect(other.body.rx_id).not.toBe(first.body.rx_id)
    // Each person's retry still replays their own answer.
    const retry = await api.request('POST', '/v1/prescriptions', { token: bo.token, body, headers })
    expect(retry.headers.get('idempotent-replayed')).toBe('true')
    expect(retry.body.rx_id).toBe(other.body.rx_id)
  })

  it("a pharmacist never reads another pharmacy's records made through the same app", async () => {
    for (let i = 0; i < 3; i++) expect((await api.get(`/v1/pharmacies/${pharmacyB.id}`, bo.token)).status).toBe(200)
    expect((await api.get('/v1/deliveries', pat)).status).toBe(200)
    await api.service.audit.flush()

    const seen = await everything(pat)
    expect(seen.length).toBeGreaterThan(0)
    expect(seen.filter((r) => r.sub === bo.id)).toEqual([])
    expect(seen.every((r) => r.sub === world.user.id && r.pharmacy_id === world.pharmacy.id)).toBe(true)
    expect(seen.every((r) => r.pos === undefined)).toBe(true)
    // Bo sees his own pharmacy's, not Pat's; the admin sees both.
    const seenByBo = await everything(bo.token)
    expect(seenByBo.some((r) => r.sub === bo.id)).toBe(true)
    expect(seenByBo.filter((r) => r.sub === world.user.id)).toEqual([])
    const all = await everything(world.admin)
    expect(all.some((r) => r.sub === bo.id) && all.some((r) => r.sub === world.user.id)).toBe(true)
    // The tenant is part of what the chain covers, and the documented formula still recomputes every hash.
    const sha = (value: unknown) => `sha256:${createHash('sha256').update(canonicalize(value)!).digest('hex')}`
    for (const { pos: _pos, hash, ...entry } of all as (Page['data'][number] & { hash: string })[]) expect(hash).toBe(sha(entry))
    expect(all.find((r) => r.sub === bo.id)!.pharmacy_id).toBe(pharmacyB.id)
  })

  it("verification covers the reader's tenant only, and its cursor names no deployment-wide position", async () => {
    await api.service.audit.flush()
    const ownCount = (await everything(pat)).length + 1 // the read just made is audited too, before verify runs
    const verdict = await api.get('/v1/audit-events/verify', pat)
    expect(verdict.body).toMatchObject({ scope: 'tenant', valid: true, next_cursor: null })
    expect(verdict.body.checked).toBeGreaterThanOrEqual(ownCount)
    const bosCount = (await api.service.db.selectFrom('audit_events').select('pos').where('sub', '=', bo.id).execute()).length
    const patsCount = (await api.service.db.selectFrom('audit_events').select('pos').where('sub', '=', world.user.id).execute()).length
    expect(verdict.body.checked).toBeLessThanOrEqual(patsCount)
    expect(bosCount).toBeGreaterThan(0)

    const paged = await api.get('/v1/audit-events/verify?limit=1', pat)
    expect(paged.body.next_cursor).toEqual(expect.any(String))
    expect(Buffer.from(paged.body.next_cursor, 'base64url').toString()).toMatch(/^sha256:/)
    const next = await api.get(`/v1/audit-events/verify?limit=1000&cursor=${paged.body.next_cursor}`, pat)
    expect(next.body).toMatchObject({ scope: 'tenant', valid: true })
    expect(next.body.checked).toBeGreaterThan(0)
  })
})
