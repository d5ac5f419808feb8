import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose'
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
      issuer: 'http://rxtrace.test', audience: 'http://rxtrace.test/v1', typ: 'at+jwt', currentDate: new Date(clock.now()),
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

  it('is refused to a token restricted to a pharmacy', async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const client = (await api.post('/v1/oauth/clients', admin, { client_name: 'store', scope: 'clients:write', pharmacy_id: pharmacy.id })).body
    const res = await api.post('/v1/oauth/signing-keys/rotate', await api.tokenFor(client.client_id, client.client_secret), {})
    expect(res.status).toBe(403)
  })
})
