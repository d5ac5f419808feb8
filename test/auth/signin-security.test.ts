import { Writable } from 'node:stream'
import pino from 'pino'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { authorizeUrl, browser, pkce } from '../helpers/browser.js'
import { sha256Hex } from '../../src/hashing.js'
import { loggerOptions } from '../../src/logger.js'
import { HOUR, MINUTE, SECOND, testClock } from '../helpers/clock.js'
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
    const missing = await b.get(
      `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: REDIRECT, state: 's1' })}`,
    )
    expect(missing.status).toBe(302)
    expect(Object.fromEntries(missing.location!.searchParams)).toMatchObject({
      error: 'invalid_request',
      state: 's1',
      iss: 'http://rxtrace.test',
    })
    const plain = await b.get(
      authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().verifier, code_challenge_method: 'plain' }),
    )
    expect(plain.location!.searchParams.get('error')).toBe('invalid_request')
    const token = await b.get(
      authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge, response_type: 'token' }),
    )
    expect(token.location!.searchParams.get('error')).toBe('unsupported_response_type')
  })

  it('a wrong verifier, another redirect URI or another client fails with invalid_grant, and spends the code', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    const wrong = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: pkce().verifier,
      client_id: clientId,
    })
    expect(wrong).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    const right = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: clientId,
    })
    expect(right.body.error).toBe('invalid_grant') // tried once, gone

    const other = await codeFor(api, clientId)
    const noVerifier = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code: other.code,
      redirect_uri: REDIRECT,
      client_id: clientId,
    })
    expect(noVerifier.body.error).toBe('invalid_request')
    const elsewhere = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code: other.code,
      redirect_uri: 'https://console.example/other',
      code_verifier: other.verifier,
      client_id: clientId,
    })
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
    expect(
      (await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: first.body.refresh_token, client_id: clientId })).body.error,
    ).toBe('invalid_grant')
  })

  it('a code expires after 60 seconds', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    await api.service.db
      .updateTable('authorization_codes')
      .set({ expires_at: new Date(Date.now() - 1).toISOString() })
      .execute()
    expect(
      (
        await tokenRequest(api, {
          grant_type: 'authorization_code',
          code,
          redirect_uri: REDIRECT,
          code_verifier: verifier,
          client_id: clientId,
        })
      ).body.error,
    ).toBe('invalid_grant')
  })

  it('a public client can neither register nor use client_credentials', async () => {
    const registered = await api.post('/v1/oauth/clients', world.admin, {
      client_name: 'SPA',
      token_endpoint_auth_method: 'none',
      grant_types: ['client_credentials'],
      redirect_uris: [REDIRECT],
    })
    expect(registered.status).toBe(422)
    expect(registered.body.errors[0].pointer).toBe('/grant_types')
    const token = await tokenRequest(api, { grant_type: 'client_credentials', client_id: clientId })
    expect(token).toMatchObject({ status: 400, body: { error: 'unauthorized_client' } })
    expect(world.client.client_secret).toBeUndefined()
  })

  it('a revoked public client can neither start a sign-in nor exchange a code nor refresh', async () => {
    const spa = (
      await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'Retired SPA',
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
        redirect_uris: [REDIRECT],
        first_party: true,
        scope: 'deliveries:read',
      })
    ).body
    const exchange = (code: string, verifier: string) =>
      tokenRequest(api, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        client_id: spa.client_id,
      })
    const first = await codeFor(api, spa.client_id)
    const tokens = await exchange(first.code, first.verifier)
    expect(tokens.status).toBe(200)
    const pending = await codeFor(api, spa.client_id) // issued before the revocation, exchanged after
    expect(await api.service.clients.revoke(spa.client_id)).not.toBeNull()

    const refreshed = await tokenRequest(api, {
      grant_type: 'refresh_token',
      refresh_token: tokens.body.refresh_token,
      client_id: spa.client_id,
    })
    expect(refreshed).toMatchObject({ status: 401, body: { error: 'invalid_client' } })
    expect((await exchange(pending.code, pending.verifier)).status).toBe(401)
    const page = await browser(api.service).get(
      authorizeUrl({ client_id: spa.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge }),
    )
    expect(page.status).toBe(400)
    expect(page.location).toBeNull()
  })

  it('only an unrestricted administrator marks a client first-party', async () => {
    const token = await api.tokenFor('cl_admin', 'admin-secret-for-tests-only-0123', 'clients:write')
    const res = await api.post('/v1/oauth/clients', token, {
      client_name: 'Sneaky',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: 'clients:write',
    })
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

describe('failed sign-ins behind a proxy (TRUST_PROXY=true)', () => {
  it("count each person's forwarded address, not the proxy's, and ignore X-Forwarded-For without TRUST_PROXY", async () => {
    for (const trustProxy of [true, false]) {
      const world = await signInWorld({ TRUST_PROXY: String(trustProxy) })
      try {
        const params = { client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge }
        // Every request reaches the service from the proxy's address; the proxy appends the caller's.
        const behindProxy = (caller: string) => browser(world.api.service, '10.0.0.2', { 'x-forwarded-for': caller })
        for (let i = 0; i < 5; i++) await signIn(behindProxy('198.51.100.80'), params, `guess${i}@example.com`, 'not the password!!')
        const guesser = await signIn(behindProxy('198.51.100.80'), params, 'pat@example.com', PASSWORD)
        const someoneElse = await signIn(behindProxy('198.51.100.81'), params, 'pat@example.com', PASSWORD)
        // Trusted, the guesser waits and the next person signs in; untrusted, the header is the caller's own words.
        expect([trustProxy, guesser.status, someoneElse.status]).toEqual(trustProxy ? [true, 429, 303] : [false, 429, 429])
      } finally {
        await world.api.stop()
      }
    }
  })
})

describe('registering a client for sign-in', () => {
  it('redirect URIs are https or loopback http, without a fragment; authorization_code needs one', async () => {
    const world = await signInWorld()
    try {
      const register = (body: Record<string, unknown>) =>
        world.api.post('/v1/oauth/clients', world.admin, { client_name: 'App', token_endpoint_auth_method: 'none', ...body })
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

describe('lifetimes and bindings of codes, refresh tokens and sessions (test clock)', () => {
  const clock = testClock()
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let clientId: string
  let otherClient: { client_id: string }
  beforeAll(async () => {
    world = await signInWorld({}, { clock })
    api = world.api
    clientId = world.client.client_id
    otherClient = (
      await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'Another Console',
        token_endpoint_auth_method: 'none',
        redirect_uris: [REDIRECT],
        first_party: true,
        scope: 'deliveries:read',
      })
    ).body
  })
  afterAll(() => api.stop())

  const exchange = (code: string, verifier: string, client = clientId) =>
    tokenRequest(api, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier, client_id: client })
  const refresh = (token: string, client = clientId) =>
    tokenRequest(api, { grant_type: 'refresh_token', refresh_token: token, client_id: client })

  it('a code works for 60 seconds, not after', async () => {
    const early = await codeFor(api, clientId)
    const late = await codeFor(api, clientId)
    clock.advance(59 * SECOND)
    expect((await exchange(early.code, early.verifier)).status).toBe(200)
    clock.advance(2 * SECOND)
    expect((await exchange(late.code, late.verifier)).body.error).toBe('invalid_grant')
  })

  it('a code and a refresh token work only for the client they were issued to', async () => {
    const { code, verifier } = await codeFor(api, clientId)
    expect((await exchange(code, verifier, otherClient.client_id)).body.error).toBe('invalid_grant')
    const mine = await codeFor(api, clientId)
    const tokens = await exchange(mine.code, mine.verifier)
    expect((await refresh(tokens.body.refresh_token, otherClient.client_id)).body.error).toBe('invalid_grant')
    expect((await refresh(tokens.body.refresh_token)).status).toBe(200) // not spent by the other client's attempt
  })

  it('a refresh token unused for 24 hours expires; a family ends 30 days after sign-in however often it rotates', async () => {
    const idle = await codeFor(api, clientId)
    const idleTokens = await exchange(idle.code, idle.verifier)
    const kept = await codeFor(api, clientId)
    let current = (await exchange(kept.code, kept.verifier)).body.refresh_token as string
    clock.advance(24 * HOUR - SECOND)
    current = (await refresh(current)).body.refresh_token // used in time: rotates
    clock.advance(2 * SECOND)
    expect((await refresh(idleTokens.body.refresh_token)).body.error).toBe('invalid_grant')
    // Rotated every 20 hours, the family still ends at 30 days.
    for (let day = 20; day < 30 * 24; day += 20) {
      clock.advance(20 * HOUR)
      const next = await refresh(current)
      if (next.status !== 200) break
      current = next.body.refresh_token
    }
    const created = await api.service.db
      .selectFrom('refresh_tokens')
      .select('family_created_at')
      .where('token_hash', '=', sha256Hex(current))
      .executeTakeFirstOrThrow()
    expect(clock.now()).toBeGreaterThanOrEqual(Date.parse(created.family_created_at) + 30 * 24 * HOUR)
    expect((await refresh(current)).body.error).toBe('invalid_grant')
  })

  it('a sign-in session ends after 8 hours without use', async () => {
    const b = browser(api.service)
    await codeFor(api, clientId, b)
    const params = () => authorizeUrl({ client_id: clientId, redirect_uri: REDIRECT, code_challenge: pkce().challenge })
    clock.advance(8 * HOUR - MINUTE)
    expect((await b.get(params())).status).toBe(302) // still signed in; the visit counts as use
    clock.advance(8 * HOUR - MINUTE)
    expect((await b.get(params())).status).toBe(302)
    clock.advance(8 * HOUR + SECOND)
    const page = await b.get(params())
    expect(page.status).toBe(200) // the sign-in page again
    expect(page.form.step).toBe('sign_in')
  })
})

describe('what a failed sign-in costs and what the pages leave behind', () => {
  it('one scrypt derivation, with the same parameters, for an unknown account, a wrong password, a disabled user and a user without a password, from the first attempt on', async () => {
    const { api, admin, pharmacy, client } = await signInWorld()
    try {
      const noPassword = (
        await api.post('/v1/users', admin, { email: 'new@example.com', name: 'New Hire', role: 'technician', pharmacy_id: pharmacy.id })
      ).body
      expect(noPassword.setup_url).toBeTruthy()
      const disabled = (
        await api.post('/v1/users', admin, {
          email: 'gone@example.com',
          name: 'Gone',
          role: 'technician',
          pharmacy_id: pharmacy.id,
          password: PASSWORD,
        })
      ).body
      expect((await api.request('PATCH', `/v1/users/${disabled.id}`, { token: admin, body: { disabled: true } })).status).toBe(200)
      const passwords = api.service.people.passwords
      const params = { client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge }
      let address = 1
      const costOf = async (email: string, password: string) => {
        const before = passwords.derivations
        const res = await signIn(browser(api.service, `198.51.100.${address++}`), params, email, password)
        expect(res.status).toBe(401)
        return passwords.derivations - before
      }
      // The first unknown account is tried first: a dummy hash made on first use would cost it two.
      expect(await costOf('nobody@example.com', 'not the password!!')).toBe(1)
      expect(await costOf('pat@example.com', 'not the password!!')).toBe(1)
      expect(await costOf('gone@example.com', PASSWORD)).toBe(1)
      expect(await costOf('new@example.com', 'not the password!!')).toBe(1)
      expect(await costOf('nobody-else@example.com', 'not the password!!')).toBe(1)
      const stored = await api.service.db
        .selectFrom('users')
        .select('password_hash')
        .where('email', '=', 'pat@example.com')
        .executeTakeFirstOrThrow()
      expect(stored.password_hash!.split('$').slice(0, 4)).toEqual((passwords as unknown as { dummy: string }).dummy.split('$').slice(0, 4))
    } finally {
      await api.stop()
    }
  })

  it('on an https issuer the cookies are __Host- prefixed, Secure, HttpOnly and SameSite=Lax', async () => {
    const { api, client } = await signInWorld({ ISSUER: 'https://rxtrace.example' })
    try {
      const b = browser(api.service)
      const page = await b.get(authorizeUrl({ client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge }))
      const csrf = page.headers.getSetCookie().find((c) => c.startsWith('__Host-rxtrace_csrf='))!
      const done = await b.post('/oauth/authorize', { ...page.form, email: 'pat@example.com', password: PASSWORD })
      expect(done.status).toBe(303)
      expect(done.location!.searchParams.get('iss')).toBe('https://rxtrace.example')
      const session = done.headers.getSetCookie().find((c) => c.startsWith('__Host-rxtrace_session='))!
      for (const cookie of [csrf, session]) {
        expect(cookie).toMatch(/; Secure/)
        expect(cookie).toMatch(/; HttpOnly/)
        expect(cookie).toMatch(/; SameSite=Lax/)
        expect(cookie).toMatch(/; Path=\//)
        expect(cookie).not.toMatch(/Domain=/i)
      }
    } finally {
      await api.stop()
    }
  })

  it('no password, setup link, code, verifier, refresh or access token, CSRF token or session id reaches a log line', async () => {
    const lines: string[] = []
    const logger = pino(
      loggerOptions('trace'),
      new Writable({
        write(chunk, _enc, done) {
          lines.push(String(chunk))
          done()
        },
      }),
    )
    const { api, admin, pharmacy, client } = await signInWorld({ LOG_LEVEL: 'trace' }, { logger })
    try {
      const secrets: string[] = [PASSWORD]
      const created = (
        await api.post('/v1/users', admin, { email: 'new@example.com', name: 'New Hire', role: 'technician', pharmacy_id: pharmacy.id })
      ).body
      const setupToken = new URL(created.setup_url).searchParams.get('token')!
      const newPassword = 'a brand new passphrase 42'
      secrets.push(setupToken, newPassword)
      const setup = browser(api.service)
      const setupPage = await setup.get(`/account/setup?token=${setupToken}`)
      expect((await setup.post('/account/setup', { ...setupPage.form, password: newPassword, confirm: newPassword })).status).toBe(200)

      const b = browser(api.service)
      const { code, verifier } = await codeFor(api, client.client_id, b)
      secrets.push(code, verifier, b.jar.get('rxtrace_session')!, b.jar.get('rxtrace_csrf')!)
      await signIn(
        browser(api.service),
        { client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge },
        'new@example.com',
        'wrong, and logged nowhere',
      )
      secrets.push('wrong, and logged nowhere')
      const tokens = await tokenRequest(api, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        client_id: client.client_id,
      })
      const refreshed = await tokenRequest(api, {
        grant_type: 'refresh_token',
        refresh_token: tokens.body.refresh_token,
        client_id: client.client_id,
      })
      secrets.push(tokens.body.refresh_token, tokens.body.access_token, refreshed.body.refresh_token, refreshed.body.access_token)
      expect((await api.get('/v1/deliveries', refreshed.body.access_token)).status).toBe(200)
      // The replay is audit-logged and logged: still without the token.
      expect(
        (await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: tokens.body.refresh_token, client_id: client.client_id }))
          .status,
      ).toBe(400)
      await b.post('/oauth/logout', {})
      await api.service.audit.flush()

      expect(lines.length).toBeGreaterThan(10) // the requests were logged
      const log = lines.join('')
      for (const secret of secrets) {
        expect(secret.length).toBeGreaterThan(11)
        expect(log).not.toContain(secret)
      }
      const audit = JSON.stringify(await api.service.db.selectFrom('audit_events').selectAll().execute())
      for (const secret of secrets) expect(audit).not.toContain(secret)
    } finally {
      await api.stop()
    }
  })
})
