import {
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportSPKI,
  generateKeyPair,
  importJWK,
  jwtVerify,
  SignJWT,
  type JWK,
} from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock, MINUTE, SECOND } from '../helpers/clock.js'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'

const ISSUER = 'http://rxtrace.test' // what startTestService configures
const AUDIENCE = `${ISSUER}/v1` // SPEC §6: aud = ISSUER + "/v1"

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`
const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

function oauthPost(api: TestApi, path: string, fields: Record<string, string>, authorization?: string) {
  return api.request('POST', path, {
    raw: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(authorization ? { authorization } : {}) },
  })
}

describe('getting an access token', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService()
  })
  afterAll(() => api.stop())

  it('issues a token to a client authenticating with HTTP Basic (client_secret_basic)', async () => {
    const res = await oauthPost(api, '/oauth/token', { grant_type: 'client_credentials' }, basic(ADMIN.id, ADMIN.secret))
    expect(res.status).toBe(200)
    expect(res.headers.get('cache-control')).toBe('no-store') // RFC 6749 §5.1
    expect(res.body).toMatchObject({ token_type: 'Bearer', expires_in: 900 })
    expect(res.body.scope.split(' ')).toContain('audit:read') // no scope asked: every scope of the client
  })

  it('issues a token to a client registered to send its credentials in the form (client_secret_post)', async () => {
    const admin = await api.adminToken()
    const poster = (
      await api.post('/v1/oauth/clients', admin, {
        client_name: 'poster',
        scope: 'pharmacies:read',
        token_endpoint_auth_method: 'client_secret_post',
      })
    ).body
    const res = await oauthPost(api, '/oauth/token', {
      grant_type: 'client_credentials',
      client_id: poster.client_id,
      client_secret: poster.client_secret,
      scope: 'pharmacies:read',
    })
    expect(res.status).toBe(200)
    expect(res.body.scope).toBe('pharmacies:read')
  })

  it('refuses a wrong secret, an unknown grant and a scope the client does not hold, in OAuth error format', async () => {
    const wrong = await oauthPost(api, '/oauth/token', { grant_type: 'client_credentials' }, basic(ADMIN.id, 'not-the-secret'))
    expect(wrong.status).toBe(401)
    expect(wrong.body.error).toBe('invalid_client')
    const grant = await oauthPost(api, '/oauth/token', { grant_type: 'password' }, basic(ADMIN.id, ADMIN.secret))
    expect(grant.status).toBe(400)
    expect(grant.body.error).toBe('unsupported_grant_type')
    const scope = await oauthPost(
      api,
      '/oauth/token',
      { grant_type: 'client_credentials', scope: 'pharmacies:read moon:write' },
      basic(ADMIN.id, ADMIN.secret),
    )
    expect(scope.status).toBe(400)
    expect(scope.body.error).toBe('invalid_scope')
  })

  it('answers a body that is not a form with an OAuth invalid_request, not a problem document', async () => {
    const res = await api.request('POST', '/oauth/token', {
      body: { grant_type: 'client_credentials', client_id: ADMIN.id, client_secret: ADMIN.secret },
    })
    expect(res.status).toBe(400)
    expect(res.headers.get('content-type')).toMatch(/^application\/json/)
    expect(res.body).toEqual({ error: 'invalid_request', error_description: expect.any(String) })
  })

  it('refuses a form over 256 KiB with 413', async () => {
    const form = `grant_type=client_credentials&client_id=${ADMIN.id}&client_secret=${ADMIN.secret}&padding=${'x'.repeat(300 * 1024)}`
    for (const headers of [{}, { 'content-length': String(form.length) }] as Record<string, string>[]) {
      const res = await api.request('POST', '/oauth/token', {
        raw: form,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      })
      expect(res.status).toBe(413)
      expect(res.body.code).toBe('payload_too_large')
    }
  })

  it('publishes RFC 8414 metadata naming the endpoints and what they support', async () => {
    const res = await api.request('GET', '/.well-known/oauth-authorization-server')
    expect(res.status).toBe(200)
    expect(res.body).toMatchObject({
      issuer: ISSUER,
      token_endpoint: `${ISSUER}/oauth/token`,
      jwks_uri: `${ISSUER}/.well-known/jwks.json`,
      revocation_endpoint: `${ISSUER}/oauth/revoke`,
      introspection_endpoint: `${ISSUER}/oauth/introspect`,
      token_endpoint_auth_methods_supported: expect.arrayContaining(['client_secret_basic', 'client_secret_post']),
      grant_types_supported: expect.arrayContaining(['client_credentials']),
    })
    expect(res.body.scopes_supported).toEqual(expect.arrayContaining(['deliveries:write', 'cold-chain:disposition', 'audit:read']))
  })

  it('issues an RFC 9068 JWT that jose verifies against the published JWKS over HTTP', async () => {
    const { httpPort } = await api.service.start()
    const jwks = createRemoteJWKSet(new URL(`http://127.0.0.1:${httpPort}/.well-known/jwks.json`))
    const token = await api.adminToken('deliveries:read audit:read')

    const { payload, protectedHeader } = await jwtVerify(token, jwks, {
      issuer: ISSUER,
      audience: AUDIENCE,
      typ: 'at+jwt',
      algorithms: ['ES256'],
    })
    expect(protectedHeader).toMatchObject({ alg: 'ES256', typ: 'at+jwt' })
    expect(protectedHeader.kid).toEqual(expect.any(String))
    expect(payload).toMatchObject({ iss: ISSUER, aud: AUDIENCE, sub: ADMIN.id, client_id: ADMIN.id, scope: 'deliveries:read audit:read' })
    expect(payload.exp! - payload.iat!).toBe(900) // 15 min
    expect(payload.jti).toMatch(/^[\w-]{16,}$/)
    expect(payload).not.toHaveProperty('pharmacy_id') // the admin is not restricted
  })
})

describe('HTTP Basic client credentials as clients really send them', () => {
  const secret = 'ops+pinned/100%-secret-value' // RFC 6749 §2.3.1 wants it form-encoded; curl -u sends it raw
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService({ ADMIN_CLIENT_SECRET: secret })
  })
  afterAll(() => api.stop())

  it('accepts the secret form-encoded (RFC 6749 §2.3.1) and as sent by curl -u, and refuses a wrong one with 401, never 500', async () => {
    expect(
      (await oauthPost(api, '/oauth/token', { grant_type: 'client_credentials' }, basic(ADMIN.id, encodeURIComponent(secret)))).status,
    ).toBe(200)
    expect((await oauthPost(api, '/oauth/token', { grant_type: 'client_credentials' }, basic(ADMIN.id, secret))).status).toBe(200)
    const wrong = await oauthPost(api, '/oauth/token', { grant_type: 'client_credentials' }, basic(ADMIN.id, '%E0%A4%A'))
    expect(wrong.status).toBe(401)
    expect(wrong.body.error).toBe('invalid_client')
  })
})

describe('a request with a bad or missing token', () => {
  const clock = testClock()
  let api: TestApi
  let good: string
  let kid: string
  beforeAll(async () => {
    api = await startTestService({}, { clock })
    good = await api.adminToken()
    kid = decodeProtectedHeader(good).kid!
  })
  afterAll(() => api.stop())

  /** Signs arbitrary claims with the service's own current key: only the claim under test is wrong. */
  async function signedByService(claims: Record<string, unknown>, header: Record<string, unknown> = {}) {
    const nowS = Math.floor(clock.now() / 1_000)
    const payload = {
      iss: ISSUER,
      aud: AUDIENCE,
      sub: ADMIN.id,
      client_id: ADMIN.id,
      scope: 'pharmacies:read',
      iat: nowS,
      exp: nowS + 600,
      jti: crypto.randomUUID(),
      ...claims,
    }
    return new SignJWT(payload)
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid, ...header })
      .sign((await api.service.keys.signingKey()).privateKey)
  }

  async function expectInvalidToken(token: string, detail?: RegExp) {
    const res = await api.get('/v1/pharmacies', token)
    expect(res.status, res.text).toBe(401)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body.code).toBe('unauthorized')
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer .*error="invalid_token"/) // RFC 6750 §3.1
    if (detail) expect(res.body.detail).toMatch(detail)
    return res
  }

  it('accepts the good token (so every refusal below is about the one thing changed)', async () => {
    expect((await api.get('/v1/pharmacies', good)).status).toBe(200)
    expect((await api.get('/v1/pharmacies', await signedByService({}))).status).toBe(200)
  })

  it('answers no token with 401 and a challenge that carries no error code (RFC 6750 §3.1)', async () => {
    const res = await api.request('GET', '/v1/pharmacies')
    expect(res.status).toBe(401)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body).toMatchObject({ status: 401, code: 'unauthorized', request_id: expect.any(String) })
    const challenge = res.headers.get('www-authenticate')!
    expect(challenge).toMatch(/^Bearer\b/)
    expect(challenge).not.toContain('error=')
  })

  it('refuses an expired token', async () => {
    const shortLived = await api.adminToken()
    expect((await api.get('/v1/pharmacies', shortLived)).status).toBe(200) // verified and cached…
    clock.advance(15 * MINUTE + SECOND)
    await expectInvalidToken(shortLived, /expired/) // …and the cache does not outlive the token
    expect((await oauthPost(api, '/oauth/introspect', { token: shortLived }, basic(ADMIN.id, ADMIN.secret))).body).toEqual({
      active: false,
    })
    good = await api.adminToken()
  })

  it('refuses alg "none"', async () => {
    const payload = decodeJwt(good)
    await expectInvalidToken(`${b64url({ alg: 'none', typ: 'at+jwt', kid })}.${b64url(payload)}.`)
  })

  it('refuses HS256 signed with the public key as the HMAC secret (algorithm confusion)', async () => {
    const jwk = (await api.service.keys.jwks()).keys.find((k) => k.kid === kid)! as JWK
    const pem = await exportSPKI((await importJWK(jwk, 'ES256', { extractable: true })) as CryptoKey)
    for (const secret of [jwk.x!, pem, JSON.stringify(jwk)]) {
      const forged = await new SignJWT({ ...decodeJwt(good) })
        .setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid })
        .sign(new TextEncoder().encode(secret))
      await expectInvalidToken(forged)
    }
  })

  it('refuses a token whose payload was changed after signing', async () => {
    const [header, , signature] = good.split('.')
    const payload = { ...decodeJwt(good), scope: 'audit:read clients:write', sub: 'someone-else' }
    await expectInvalidToken(`${header}.${b64url(payload)}.${signature}`)
  })

  it('refuses a token signed by another key under our kid', async () => {
    const { privateKey } = await generateKeyPair('ES256')
    const [, payload] = good.split('.')
    const forged = await new SignJWT(JSON.parse(Buffer.from(payload!, 'base64url').toString()))
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid })
      .sign(privateKey)
    await expectInvalidToken(forged)
  })

  it('refuses a token from another issuer, for another audience, or not typed at+jwt', async () => {
    await expectInvalidToken(await signedByService({ iss: 'https://evil.example' }), /iss/)
    await expectInvalidToken(await signedByService({ aud: 'https://other-api.example/v1' }), /aud/)
    await expectInvalidToken(await signedByService({ aud: ISSUER }), /aud/) // the issuer itself is not the API
    await expectInvalidToken(await signedByService({}, { typ: 'JWT' })) // RFC 9068 §4: typ must be at+jwt
  })

  it('refuses a token whose kid is not in the key set', async () => {
    const { privateKey } = await generateKeyPair('ES256')
    const payload = decodeJwt(good)
    const forged = await new SignJWT(payload).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'key_not_ours' }).sign(privateKey)
    await expectInvalidToken(forged, /unknown key/)
  })

  it('refuses garbage and a non-Bearer scheme', async () => {
    await expectInvalidToken('not.a.jwt')
    const res = await api.request('GET', '/v1/pharmacies', { headers: { authorization: basic(ADMIN.id, ADMIN.secret) } })
    expect(res.status).toBe(401)
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /)
  })

  it('answers a token without the route scope with 403 insufficient_scope naming the scope', async () => {
    const readOnly = await api.adminToken('pharmacies:read')
    const res = await api.post('/v1/fleets', readOnly, { name: 'Nope' })
    expect(res.status).toBe(403)
    expect(res.body).toMatchObject({ code: 'insufficient_scope', required_scope: 'fleet:write' })
    expect(res.headers.get('www-authenticate')).toMatch(/error="insufficient_scope"/)
    expect(res.headers.get('www-authenticate')).toMatch(/scope="fleet:write"/)
    expect((await api.get('/v1/fleets', readOnly)).status).toBe(403)
  })
})

describe('revoking and introspecting a token', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService()
  })
  afterAll(() => api.stop())

  it('introspects an active token with its claims, and a revoked one as inactive; the revoked token stops working', async () => {
    const token = await api.adminToken('pharmacies:read')
    expect((await api.get('/v1/pharmacies', token)).status).toBe(200)

    const active = await oauthPost(api, '/oauth/introspect', { token }, basic(ADMIN.id, ADMIN.secret))
    expect(active.status).toBe(200)
    expect(active.body).toMatchObject({
      active: true,
      client_id: ADMIN.id,
      sub: ADMIN.id,
      scope: 'pharmacies:read',
      iss: ISSUER,
      aud: AUDIENCE,
      jti: decodeJwt(token).jti,
    })

    const revoked = await oauthPost(api, '/oauth/revoke', { token, token_type_hint: 'access_token' }, basic(ADMIN.id, ADMIN.secret))
    expect(revoked.status).toBe(200)

    const after = await api.get('/v1/pharmacies', token)
    expect(after.status).toBe(401)
    expect(after.headers.get('www-authenticate')).toContain('error="invalid_token"')
    expect(after.body.detail).toMatch(/revoked/)
    const inactive = await oauthPost(api, '/oauth/introspect', { token }, basic(ADMIN.id, ADMIN.secret))
    expect(inactive.body).toEqual({ active: false })
    // Other tokens of the same client are untouched.
    expect((await api.get('/v1/pharmacies', await api.adminToken('pharmacies:read'))).status).toBe(200)
  })

  it("neither revokes nor shows another client's token", async () => {
    const admin = await api.adminToken()
    const pharmacy = (await api.pharmacy(admin)).id
    const other = await api.post('/v1/oauth/clients', admin, { client_name: 'other', scope: 'pharmacies:read', pharmacy_id: pharmacy })
    expect(other.status, other.text).toBe(201)
    const theirs = basic(other.body.client_id, other.body.client_secret)
    const victim = await api.adminToken('pharmacies:read')
    expect((await oauthPost(api, '/oauth/introspect', { token: victim }, theirs)).body).toEqual({ active: false })
    expect((await oauthPost(api, '/oauth/revoke', { token: victim }, theirs)).status).toBe(200) // RFC 7009 §2.2: no oracle
    expect((await api.get('/v1/pharmacies', victim)).status).toBe(200)
  })

  it('introspects garbage as inactive, and refuses an unauthenticated caller', async () => {
    expect((await oauthPost(api, '/oauth/introspect', { token: 'garbage' }, basic(ADMIN.id, ADMIN.secret))).body).toEqual({ active: false })
    const anonymous = await oauthPost(api, '/oauth/introspect', { token: await api.adminToken() })
    expect(anonymous.status).toBe(401)
    expect(anonymous.body.error).toBe('invalid_client')
  })
})
