import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { authorizeUrl, browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { codeFor, PASSWORD, REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

describe('a pharmacist signs in to a first-party public app', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
  })
  afterAll(() => api.stop())

  it('authorize → sign-in form with CSRF → code → tokens → refresh rotation → reuse revokes the family → logout', async () => {
    const b = browser(api.service)
    const { verifier, challenge } = pkce()
    const params = {
      client_id: world.client.client_id,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      state: 'opaque state/with spaces & symbols',
    }

    // The sign-in page: no session yet, names the app, carries a CSRF token bound to a cookie.
    const page = await b.get(authorizeUrl(params))
    expect(page.status).toBe(200)
    expect(page.text).toContain('Pharmacist Console')
    expect(page.form.csrf_token).toMatch(/^[\w-]{43}$/)
    expect([...b.jar.keys()]).toEqual(['rxtrace_csrf'])
    expect(page.headers.get('cache-control')).toBe('no-store')
    expect(page.headers.get('x-frame-options')).toBe('DENY')
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
    expect(page.headers.get('referrer-policy')).toBe('no-referrer')

    // Signed in: a session cookie (HttpOnly, SameSite=Lax; not Secure on this http issuer) and the redirect.
    const done = await b.post('/oauth/authorize', { ...page.form, email: 'PAT@example.com', password: 'correct horse battery staple' })
    expect(done.status).toBe(303)
    const setCookie = done.headers.getSetCookie().find((c) => c.startsWith('rxtrace_session='))!
    expect(setCookie).toMatch(/HttpOnly/)
    expect(setCookie).toMatch(/SameSite=Lax/)
    expect(setCookie).not.toMatch(/Secure/)
    expect(done.location!.origin + done.location!.pathname).toBe(REDIRECT)
    expect(done.location!.searchParams.get('state')).toBe(params.state)
    expect(done.location!.searchParams.get('iss')).toBe('http://rxtrace.test')
    const code = done.location!.searchParams.get('code')!

    // The public client exchanges the code with its verifier, no secret.
    const exchanged = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: world.client.client_id,
    })
    expect(exchanged.status).toBe(200)
    const claims = decodeJwt(exchanged.body.access_token)
    expect(claims.sub).toBe(world.user.id)
    expect(claims.client_id).toBe(world.client.client_id)
    expect(claims.pharmacy_id).toBe(world.pharmacy.id)
    // Capped by the role: a pharmacist never gets clients:write, though the client holds it.
    expect(exchanged.body.scope.split(' ').sort()).toEqual([
      'audit:read',
      'cold-chain:disposition',
      'custody:write',
      'deliveries:read',
      'deliveries:write',
      'pharmacies:read',
      'prescriptions:read',
      'prescriptions:write',
      'products:write',
      'telemetry:read',
      'webhooks:read',
    ])
    expect(exchanged.body.refresh_token).toMatch(/^rt_/)
    expect((await api.get('/v1/deliveries', exchanged.body.access_token)).status).toBe(200)
    expect((await api.get('/v1/users', exchanged.body.access_token)).status).toBe(403)

    // A second visit reuses the session: straight back with a new code.
    const again = await b.get(authorizeUrl({ ...params, code_challenge: pkce().challenge }))
    expect(again.status).toBe(302)
    expect(again.location!.searchParams.get('code')).toBeTruthy()

    // Rotation: every refresh hands out a new refresh token.
    const first = exchanged.body.refresh_token as string
    const refreshed = await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: first, client_id: world.client.client_id })
    expect(refreshed.status).toBe(200)
    expect(refreshed.body.refresh_token).not.toBe(first)
    const second = refreshed.body.refresh_token as string
    expect((await api.get('/v1/deliveries', refreshed.body.access_token)).status).toBe(200)

    // Reuse of the rotated token: invalid_grant, and the whole family (the newer token and its access token) is revoked.
    const replay = await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: first, client_id: world.client.client_id })
    expect(replay).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    expect(
      (await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: second, client_id: world.client.client_id })).status,
    ).toBe(400)
    expect((await api.get('/v1/deliveries', refreshed.body.access_token)).status).toBe(401)
    expect((await api.get('/v1/deliveries', exchanged.body.access_token)).status).toBe(401)
    await api.service.audit.flush()
    const audit = await api.service.db.selectFrom('audit_events').selectAll().where('path', 'like', '%refresh_token reused%').execute()
    expect(audit).toHaveLength(1)
    expect(audit[0]).toMatchObject({ client_id: world.client.client_id, sub: world.user.id })

    // Logout ends the session and revokes the refresh tokens issued under it.
    const fresh = pkce()
    const back = await b.get(authorizeUrl({ ...params, code_challenge: fresh.challenge })) // still signed in
    const tokens = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code: back.location!.searchParams.get('code')!,
      redirect_uri: REDIRECT,
      code_verifier: fresh.verifier,
      client_id: world.client.client_id,
    })
    expect(tokens.status).toBe(200)
    const out = await b.post('/oauth/logout', {})
    expect(out.status).toBe(200)
    expect(b.jar.has('rxtrace_session')).toBe(false)
    expect(
      (
        await tokenRequest(api, {
          grant_type: 'refresh_token',
          refresh_token: tokens.body.refresh_token,
          client_id: world.client.client_id,
        })
      ).status,
    ).toBe(400)
    expect((await api.get('/v1/deliveries', tokens.body.access_token)).status).toBe(401)
    expect((await b.get(authorizeUrl({ ...params, code_challenge: pkce().challenge }))).status).toBe(200) // the sign-in page again
  })

  it('stores no password, code, refresh token or session id in clear', async () => {
    const { code, verifier, browser: b } = await codeFor(api, world.client.client_id)
    const tokens = await tokenRequest(api, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: world.client.client_id,
    })
    const db = api.service.db
    const users = await db.selectFrom('users').select('password_hash').execute()
    expect(users.every((u) => u.password_hash?.startsWith('scrypt$10$8$3$'))).toBe(true)
    expect(await db.selectFrom('authorization_codes').selectAll().where('code_hash', '=', code).execute()).toHaveLength(0)
    expect(await db.selectFrom('refresh_tokens').selectAll().where('token_hash', '=', tokens.body.refresh_token).execute()).toHaveLength(0)
    expect(await db.selectFrom('user_sessions').selectAll().where('id_hash', '=', b.jar.get('rxtrace_session')!).execute()).toHaveLength(0)
  })

  it('a new session id at every sign-in (no session fixation)', async () => {
    const b = browser(api.service)
    await codeFor(api, world.client.client_id, b)
    const before = b.jar.get('rxtrace_session')
    const { challenge } = pkce()
    // Signing in again (as through a second form) replaces the id and ends the old session.
    const page = await b.get(authorizeUrl({ client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: challenge }))
    expect(page.status).toBe(302)
    b.jar.delete('rxtrace_session')
    const planted = before!
    b.jar.set('rxtrace_session', planted)
    await b.post('/oauth/authorize', {
      ...(
        await browser(api.service).get(
          authorizeUrl({ client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: challenge }),
        )
      ).form,
      csrf_token: b.jar.get('rxtrace_csrf')!,
      step: 'sign_in',
      email: 'pat@example.com',
      password: 'correct horse battery staple',
    })
    expect(b.jar.get('rxtrace_session')).not.toBe(planted)
    const old = await api.service.people.sessions.resume(planted)
    expect(old).toBeNull()
  })
})

describe('signing in with a confidential third-party app', () => {
  it('shows a consent page in plain words; deny redirects access_denied, allow redirects a code', async () => {
    const { api, admin } = await signInWorld()
    try {
      const app = (
        await api.post('/v1/oauth/clients', admin, {
          client_name: 'Refill Reminders Inc.',
          grant_types: ['authorization_code'],
          redirect_uris: [REDIRECT],
          scope: 'prescriptions:read deliveries:read clients:write',
        })
      ).body
      const b = browser(api.service)
      const { verifier, challenge } = pkce()
      const consent = await signIn(b, { client_id: app.client_id, redirect_uri: REDIRECT, code_challenge: challenge })
      expect(consent.status).toBe(200)
      expect(consent.text).toContain('Allow Refill Reminders Inc.?')
      expect(consent.text).toContain('See prescriptions queued for delivery')
      expect(consent.text).toContain('See deliveries and their chain of custody')
      expect(consent.text).not.toContain('Manage apps') // clients:write is beyond a pharmacist's role

      const denied = await b.post('/oauth/authorize', { ...consent.form, decision: 'deny' })
      expect(denied.location!.searchParams.get('error')).toBe('access_denied')
      expect(denied.location!.searchParams.get('state')).toBe('st-123')
      expect(denied.location!.searchParams.get('iss')).toBe('http://rxtrace.test')

      const allowed = await b.post('/oauth/authorize', { ...consent.form, decision: 'allow' })
      expect(allowed.status).toBe(303)
      const code = allowed.location!.searchParams.get('code')!
      const tokens = await tokenRequest(
        api,
        { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier },
        { id: app.client_id, secret: app.client_secret },
      )
      expect(tokens.status).toBe(200)
      expect(tokens.body.scope).toBe('prescriptions:read deliveries:read')
      expect(tokens.body.refresh_token).toBeUndefined() // not registered for refresh_token
    } finally {
      await api.stop()
    }
  })
})

describe('consent to a third-party app is remembered per (user, app, scope)', () => {
  it('is asked once; asked again for a new scope, after "Deny", after signing out, after a replayed code, and of each person', async () => {
    const { api, admin, pharmacy } = await signInWorld()
    try {
      const app = (
        await api.post('/v1/oauth/clients', admin, {
          client_name: 'Refill Reminders Inc.',
          grant_types: ['authorization_code'],
          redirect_uris: [REDIRECT],
          scope: 'prescriptions:read deliveries:read',
        })
      ).body
      const b = browser(api.service)
      const ask = (scope: string) =>
        b.get(authorizeUrl({ client_id: app.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge, scope }))
      const isConsentPage = (page: { status: number; text: string }) =>
        page.status === 200 && page.text.includes('Allow Refill Reminders Inc.?')

      const first = await signIn(b, {
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        code_challenge: pkce().challenge,
        scope: 'prescriptions:read',
      })
      expect(isConsentPage(first)).toBe(true)
      expect((await b.post('/oauth/authorize', { ...first.form, decision: 'allow' })).status).toBe(303)

      // Remembered: the same scope (or part of it) goes straight back with a code.
      const again = await ask('prescriptions:read')
      expect(again.status).toBe(302)
      expect(again.location!.searchParams.get('code')).toBeTruthy()

      // A scope not allowed yet: asked again, listing what is asked; "Deny" forgets the app's consent.
      const wider = await ask('prescriptions:read deliveries:read')
      expect(isConsentPage(wider)).toBe(true)
      expect(wider.text).toContain('See deliveries and their chain of custody')
      expect((await b.post('/oauth/authorize', { ...wider.form, decision: 'deny' })).location!.searchParams.get('error')).toBe(
        'access_denied',
      )
      expect(isConsentPage(await ask('prescriptions:read'))).toBe(true)

      // Allowed again, then signing out forgets it: the next sign-in asks again.
      const allowed = await ask('prescriptions:read deliveries:read')
      expect((await b.post('/oauth/authorize', { ...allowed.form, decision: 'allow' })).status).toBe(303)
      expect((await ask('deliveries:read')).status).toBe(302)
      await b.post('/oauth/logout', {})
      const afterLogout = await signIn(b, {
        client_id: app.client_id,
        redirect_uri: REDIRECT,
        code_challenge: pkce().challenge,
        scope: 'deliveries:read',
      })
      expect(isConsentPage(afterLogout)).toBe(true)

      // A replayed code (someone else holds it) forgets the consent too.
      const { verifier, challenge } = pkce()
      const consent = await b.get(
        authorizeUrl({ client_id: app.client_id, redirect_uri: REDIRECT, code_challenge: challenge, scope: 'deliveries:read' }),
      )
      const code = (await b.post('/oauth/authorize', { ...consent.form, decision: 'allow' })).location!.searchParams.get('code')!
      const exchange = () =>
        tokenRequest(
          api,
          { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier },
          { id: app.client_id, secret: app.client_secret },
        )
      expect((await exchange()).status).toBe(200)
      expect((await ask('deliveries:read')).status).toBe(302)
      expect((await exchange()).status).toBe(400)
      expect(isConsentPage(await ask('deliveries:read'))).toBe(true)

      // Consent is the person's: another user of the same pharmacy is asked for their own.
      const allowedAgain = await ask('deliveries:read')
      expect((await b.post('/oauth/authorize', { ...allowedAgain.form, decision: 'allow' })).status).toBe(303)
      await api.post('/v1/users', admin, {
        email: 'sam@example.com',
        name: 'Sam Pharmacist',
        role: 'pharmacist',
        pharmacy_id: pharmacy.id,
        password: PASSWORD,
      })
      const other = await signIn(
        browser(api.service),
        { client_id: app.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge, scope: 'deliveries:read' },
        'sam@example.com',
      )
      expect(isConsentPage(other)).toBe(true)
    } finally {
      await api.stop()
    }
  })
})
