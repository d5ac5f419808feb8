import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, SECOND, testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'

describe('rotating the token signing key', () => {
  const clock = testClock()
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService({}, { clock })
  })
  afterAll(() => api.stop())

  const jwks = async () => (await api.request<JSONWebKeySet>('GET', '/.well-known/jwks.json')).body
  const kidsOf = async () => (await jwks()).keys.map((k) => k.kid)
  /** What an outside verifier does: fetch the JWKS, verify with jose. */
  const verifiesAgainstJwks = async (token: string) => {
    const { protectedHeader } = await jwtVerify(token, createLocalJWKSet(await jwks()), {
      issuer: 'http://rxtrace.test',
      audience: 'http://rxtrace.test/v1',
      typ: 'at+jwt',
      currentDate: new Date(clock.now()),
    })
    return protectedHeader.kid
  }

  it('publishes the new key beside the old one, keeps old tokens valid, signs new tokens with the new key, and retires the old key after the TTL', async () => {
    const oldToken = await api.adminToken()
    const [oldKid] = await kidsOf()
    expect(decodeProtectedHeader(oldToken).kid).toBe(oldKid)

    clock.advance(5 * MINUTE)
    const rotated = await api.post('/v1/oauth/signing-keys/rotate', await api.adminToken('clients:write'), {})
    expect(rotated.status, rotated.text).toBe(200)
    const newKid = rotated.body.kid
    expect(newKid).not.toBe(oldKid)
    // The old key stays until every token it signed has expired (issued ≤ now, TTL 15 min).
    expect(rotated.body.previous_retires_at).toBe(new Date(clock.now() + 15 * MINUTE).toISOString())

    const keys = (await jwks()).keys
    expect(keys.map((k) => k.kid).sort()).toEqual([oldKid, newKid].sort())
    for (const key of keys) expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' })
    for (const key of keys) expect(key).not.toHaveProperty('d') // never the private part

    expect((await api.get('/v1/pharmacies', oldToken)).status).toBe(200)
    expect(await verifiesAgainstJwks(oldToken)).toBe(oldKid)

    const newToken = await api.adminToken()
    expect(decodeProtectedHeader(newToken).kid).toBe(newKid)
    expect((await api.get('/v1/pharmacies', newToken)).status).toBe(200)
    expect(await verifiesAgainstJwks(newToken)).toBe(newKid)

    clock.advance(15 * MINUTE + SECOND)
    expect(await kidsOf()).toEqual([newKid])
    expect((await api.get('/v1/pharmacies', oldToken)).status).toBe(401)
    expect((await api.get('/v1/pharmacies', await api.adminToken())).status).toBe(200)
  })

  it('with publish_ahead_s, publishes the next key before it signs anything', async () => {
    clock.advance(MINUTE)
    const [currentKid] = await kidsOf()
    const rotated = await api.post('/v1/oauth/signing-keys/rotate', await api.adminToken(), { publish_ahead_s: 60 })
    expect(rotated.status, rotated.text).toBe(200)
    expect((await kidsOf()).sort()).toEqual([currentKid, rotated.body.kid].sort())
    expect(decodeProtectedHeader(await api.adminToken()).kid).toBe(currentKid)
    clock.advance(60 * SECOND)
    expect(decodeProtectedHeader(await api.adminToken()).kid).toBe(rotated.body.kid)
  })

  it('lets a second rotation replace a key still waiting to activate: tokens live their whole TTL', async () => {
    clock.advance(MINUTE)
    const admin = await api.adminToken()
    const pending = (await api.post('/v1/oauth/signing-keys/rotate', admin, { publish_ahead_s: 60 })).body
    clock.advance(SECOND)
    const replacement = (await api.post('/v1/oauth/signing-keys/rotate', admin, {})).body
    expect(await kidsOf()).not.toContain(pending.kid) // it never signed anything
    clock.advance(2 * MINUTE) // past the pending key's activation time
    const token = await api.adminToken()
    expect(decodeProtectedHeader(token).kid).toBe(replacement.kid)
    clock.advance(15 * MINUTE - SECOND)
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)
  })

  it('is refused to a token restricted to a pharmacy', async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const client = (await api.post('/v1/oauth/clients', admin, { client_name: 'store', scope: 'clients:write', pharmacy_id: pharmacy.id }))
      .body
    const res = await api.post('/v1/oauth/signing-keys/rotate', await api.tokenFor(client.client_id, client.client_secret), {})
    expect(res.status).toBe(403)
  })
})

describe('a key rotated by another instance on the same store', () => {
  const clock = testClock()
  const file = join(mkdtempSync(join(tmpdir(), 'rxtrace-keys-')), 'rxtrace.db')
  let a: TestApi
  let b: TestApi
  beforeAll(async () => {
    a = await startTestService({}, { clock, store: { kind: 'sqlite', file } })
    b = await startTestService({}, { clock, store: { kind: 'sqlite', file } })
  })
  afterAll(async () => {
    await a.stop()
    await b.stop()
    rmSync(dirname(file), { recursive: true, force: true })
  })

  // a and b run on one thread, each with its own connection to the file. An instance's writes
  // (its audit records, flushed 20 ms after a request) keep the write lock until the end of that
  // event-loop turn (group commit): a write by the other one in the same turn waits its 5 s busy
  // timeout on the very thread that would release the lock, and fails. Separate processes wait
  // for each other; here, each instance's writes are committed before the other one writes.
  const settled = async (api: TestApi) => api.service.audit.flush()

  it('is accepted, published and used by every instance without a restart', async () => {
    const before = await a.adminToken()
    expect((await b.get('/v1/pharmacies', before)).status).toBe(200)
    await settled(b)
    clock.advance(MINUTE)
    const rotation = await a.post('/v1/oauth/signing-keys/rotate', before, {})
    expect(rotation.status, rotation.text).toBe(200)
    const rotated = rotation.body
    await settled(a)

    const fromA = await a.adminToken()
    expect(decodeProtectedHeader(fromA).kid).toBe(rotated.kid)
    expect((await b.get('/v1/pharmacies', fromA)).status).toBe(200) // b looks the new kid up at once
    await settled(b)

    clock.advance(30 * SECOND) // b re-reads its key set
    expect((await b.request<JSONWebKeySet>('GET', '/.well-known/jwks.json')).body.keys.map((k) => k.kid)).toContain(rotated.kid)
    expect(decodeProtectedHeader(await b.adminToken()).kid).toBe(rotated.kid)

    clock.advance(15 * MINUTE) // the old key has retired everywhere; b still issues tokens
    const fromB = await b.adminToken()
    expect((await a.get('/v1/pharmacies', fromB)).status).toBe(200)
    await settled(a)
    expect((await b.get('/v1/pharmacies', before)).status).toBe(401)
  })
})
