import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { authorizeUrl, browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { codeFor, PASSWORD, REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

describe('sign-in security (RFC 9700)', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let clientId: string
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
    clientId = world.client.client_id
  })
  afterAll(() => api.stop())

  it('an unregistered or slightly different redirect URI is shown on a page, never redirected to', async () => {
    const b = browser(api.service)
    for (const redirect of ['https://evil.example/callback', `${REDIRECT}/`, `${REDIRECT}?x=1`, 'https://console.example/Callback', '']) {
      const page = await b.get(authorizeUrl({ client_id: clientId, redirect_uri: redirect, code_challenge: pkce().challenge }))
      expect(page.status).toBe(400)
      expect(page.location).toBeNull()
      expect(page.text).toContain('not registered')
      expect(page.headers.get('x-frame-options')).toBe('DENY')
    }
    const unknown = await b.get(authorizeUrl({ client_id: 'cl_nobody', redirect_uri: REDIRECT, code_challenge: pkce().challenge }))
    expect(unknown.status).toBe(400)
    expect(unknown.location).toBeNull()
  })

  it('PKCE is required, S256 only: a missing challenge or plain is redirected back as invalid_request', async () => {
    const b = browser(api.service)
    const missing = await b.get(`/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, state: 's1' })}`)
    expect(missing.status).toBe(302)
    expect(Object.fromEntries(missing.location!.searchParams)).toMatchObject({ error: 'invalid_request', state: 's1', iss: 'http://rxtrace.test' })
    const plain = await b.get(authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().verifier, code_challenge_method: 'plain' }))
    expect(plain.location!.searchParams.get('error')).toBe('invalid_request')
    const token = await b.get(authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, response_type: 'token' }))
    expect(token.location!.searchParams.get('error')).toBe('unsupported_response_type')
  })

  it('a wrong verifier, another redirect URI or another client fails with invalid_grant, and spends the code', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    const wrong = await tokenRequest(api, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: pkce().verifier, client_id: clientId })
    expect(wrong).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    const right = await tokenRequest(api, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId })
    expect(right.body.error).toBe('invalid_grant') // tried once, gone

    const other = await codeFor(api, clientId)
    const noVerifier = await tokenRequest(api, { grant_type: 'authorization_code', code: other.code, redirect_uri: REDIRECT, client_id: clientId })
    expect(noVerifier.body.error).toBe('invalid_request')
    const elsewhere = await tokenRequest(api, { grant_type: 'authorization_code', code: other.code, redirect_uri: 'https://console.example/other', code_verifier: other.verifier, client_id: clientId })
    expect(elsewhere.body.error).toBe('invalid_grant')
  })

  it('a code used twice fails with invalid_grant and revokes what its first use issued', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    const form = { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId }
    const first = await tokenRequest(api, form)
    expect(first.status).toBe(200)
    expect((await api.get('/v1/deliveries', first.body.access_token)).status).toBe(200)
    expect(await tokenRequest(api, form)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    expect((await api.get('/v1/deliveries', first.body.access_token)).status).toBe(401)
    expect((await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token, client_id: clientId })).body.error).toBe('invalid_grant')
  })

  it('a code expires after 60 seconds', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    await api.service.db.updateTable('authorization_codes').set({ expires_at: new Date(Date.now() - 1).toISOString() }).execute()
    expect((await tokenRequest(api, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: clientId })).body.error).toBe('invalid_grant')
  })

  it('a public client can neither register nor use client_credentials', async () => {
    const registered = await api.post('/v1/oauth/clients', world.admin, { client_name: 'SPA', token_endpoint_auth_method: 'none', grant_types: ['client_credentials'], redirect_uris: [REDIRECT] })
    expect(registered.status).toBe(422)
    expect(registered.body.errors[0].pointer).toBe('/grant_types')
    const token = await tokenRequest(api, { grant_type: 'client_credentials', client_id: clientId })
    expect(token).toMatchObject({ status: 400, body: { error: 'unauthorized_client' } })
    expect(world.client.client_secret).toBeUndefined()
  })

  it('only an unrestricted administrator marks a client first-party', async () => {
    const token = await api.tokenFor('cl_admin', 'admin-secret-for-tests-only-0123', 'clients:write')
    const res = await api.post('/v1/oauth/clients', token, { client_name: 'Sneaky', token_endpoint_auth_method: 'none', redirect_uris: [REDIRECT], first_party: true, scope: 'clients:write' })
    expect(res.status).toBe(422)
    expect(res.body.errors[0].pointer).toBe('/first_party')
  })

  it('a CSRF token that does not match the pre-session cookie is refused', async () => {
    const b = browser(api.service)
    const page = await b.get(authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge }))
    const res = await b.post('/oauth/authorize', { ...page.form, csrf_token: 'x'.repeat(43), email: 'pat@example.com', password: PASSWORD })
    expect(res.status).toBe(400)
    expect(res.location).toBeNull()
    expect(b.jar.has('rxtrace_session')).toBe(false)
  })

  it('failed sign-ins: one generic message whether or not the account exists, then a wait per account and per address', async () => {
    const params = { client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge }
    const wrongPassword = await signIn(browser(api.service, '198.51.100.1'), params, 'pat@example.com', 'not the password!!')
    const noAccount = await signIn(browser(api.service, '198.51.100.2'), params, 'nobody@example.com', 'not the password!!')
    expect(wrongPassword.status).toBe(401)
    expect(noAccount.status).toBe(401)
    const message = (html: string) => /<p class="error" role="alert">([^<]*)<\/p>/.exec(html)![1]
    expect(message(wrongPassword.text)).toBe(message(noAccount.text))

    // Per account: four more failures from different addresses, then even the right password waits.
    for (let i = 3; i <= 6; i++) await signIn(browser(api.service, `198.51.100.${i}`), params, 'pat@example.com', 'still not it!!!!')
    const locked = await signIn(browser(api.service, '198.51.100.99'), params, 'pat@example.com', PASSWORD)
    expect(locked.status).toBe(429)
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(0)

    // Per address: one address guessing five different accounts waits too.
    const guesser = browser(api.service, '192.0.2.50')
    for (let i = 0; i < 5; i++) await signIn(guesser, params, `guess${i}@example.com`, 'not the password!!')
    expect((await signIn(guesser, params, 'someone-else@example.com', 'not the password!!')).status).toBe(429)
  })
})

describe('registering a client for sign-in', () => {
  it('redirect URIs are https or loopback http, without a fragment; authorization_code needs one', async () => {
    const world = await signInWorld()
    try {
      const register = (body: Record<string, unknown>) => world.api.post('/v1/oauth/clients', world.admin, { client_name: 'App', token_endpoint_auth_method: 'none', ...body })
      for (const uri of ['http://app.example/cb', 'https://app.example/cb#frag']) {
        const res = await register({ redirect_uris: [uri] })
        expect(res.status).toBe(422)
        expect(res.body.errors[0].pointer).toBe('/redirect_uris/0')
      }
      expect((await register({})).body.errors[0].pointer).toBe('/redirect_uris')
      expect((await register({ redirect_uris: ['http://127.0.0.1:4000/cb'] })).status).toBe(201)
    } finally {
      await world.api.stop()
    }
  })
})
