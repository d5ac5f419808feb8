import { decodeJwt } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { hashSecret } from '../../src/hashing.js'
import { browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { PASSWORD, REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

/**
 * A client restricted to one pharmacy signs in only that pharmacy's people: a person of another
 * pharmacy (or an administrator, who belongs to none) is refused on a page once signed in, and
 * no grant (code exchange, refresh) mints a token for them through it.
 */
describe('a client restricted to a pharmacy', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let pharmacyB: { id: string }
  let appA: { client_id: string; client_secret: string }
  let thirdPartyA: { client_id: string; client_secret: string }
  let userB: { id: string }
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
    pharmacyB = await api.pharmacy(world.admin, { name: 'Elm Street Pharmacy' })
    const register = async (body: Record<string, unknown>) => {
      const res = await api.post('/v1/oauth/clients', world.admin, {
        grant_types: ['authorization_code', 'refresh_token'],
        redirect_uris: [REDIRECT],
        scope: 'deliveries:read pharmacies:read',
        pharmacy_id: world.pharmacy.id,
        ...body,
      })
      expect(res.status).toBe(201)
      return res.body
    }
    appA = await register({ client_name: 'Main Street app', first_party: true })
    thirdPartyA = await register({ client_name: 'Main Street reminders' })
    userB = (
      await api.post('/v1/users', world.admin, {
        email: 'bo@example.com',
        name: 'Bo of Elm Street',
        role: 'pharmacist',
        pharmacy_id: pharmacyB.id,
        password: PASSWORD,
      })
    ).body
    await api.post('/v1/users', world.admin, { email: 'ada@example.com', name: 'Ada Admin', role: 'admin', password: PASSWORD })
  })
  afterAll(() => api.stop())

  const exchange = (code: string, verifier: string, client: { client_id: string; client_secret: string }) =>
    tokenRequest(
      api,
      { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier },
      { id: client.client_id, secret: client.client_secret },
    )

  it('signs in its own pharmacy’s pharmacist, whose token names that pharmacy', async () => {
    const { verifier, challenge } = pkce()
    const done = await signIn(browser(api.service), { client_id: appA.client_id, redirect_uri: REDIRECT, code_challenge: challenge })
    expect(done.status).toBe(303)
    const tokens = await exchange(done.location!.searchParams.get('code')!, verifier, appA)
    expect(tokens.status).toBe(200)
    expect(decodeJwt(tokens.body.access_token).pharmacy_id).toBe(world.pharmacy.id)
  })

  it('its consent page names the pharmacy it is restricted to; an unrestricted app’s says so', async () => {
    const consent = await signIn(browser(api.service), {
      client_id: thirdPartyA.client_id,
      redirect_uri: REDIRECT,
      code_challenge: pkce().challenge,
    })
    expect(consent.status).toBe(200)
    expect(consent.text).toContain('Allow Main Street reminders?')
    expect(consent.text).toMatch(/registered for Main Street Pharmacy only \(a pharmacy\)/)
    const open = (
      await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'Anywhere reminders',
        grant_types: ['authorization_code'],
        redirect_uris: [REDIRECT],
        scope: 'deliveries:read',
      })
    ).body
    const page = await signIn(browser(api.service), { client_id: open.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge })
    expect(page.text).toContain('Allow Anywhere reminders?')
    expect(page.text).toMatch(/not restricted to one pharmacy or fleet/)
  })

  it('refuses a person of another pharmacy, or an administrator, on a page that says why, and redirects no code', async () => {
    for (const client of [appA, thirdPartyA]) {
      for (const email of ['bo@example.com', 'ada@example.com']) {
        const b = browser(api.service)
        const page = await signIn(b, { client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge }, email)
        expect(page.status).toBe(403)
        expect(page.location).toBeNull()
        expect(page.text).toContain('Main Street Pharmacy')
        expect(page.text).toMatch(/only for people of/)
        // Signed in already: coming back to the app with the session is refused the same way.
        const again = await b.get(
          `/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: client.client_id, redirect_uri: REDIRECT, code_challenge: pkce().challenge, code_challenge_method: 'S256', state: 's' })}`,
        )
        expect(again.status).toBe(403)
      }
    }
  })

  it('no code exchange or refresh mints a token for another pharmacy’s person through it', async () => {
    // A code and a refresh family for Bo through Main Street's app, as an older version could have issued them.
    const { verifier, challenge } = pkce()
    const session = await api.service.people.sessions.start(userB.id)
    const code = await api.service.people.codes.issue({
      client_id: appA.client_id,
      user_id: userB.id,
      session_hash: session.session.idHash,
      redirect_uri: REDIRECT,
      code_challenge: challenge,
      scope: 'deliveries:read',
    })
    const exchanged = await exchange(code, verifier, appA)
    expect(exchanged).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })

    const refreshToken = await api.service.people.refreshTokens.add(
      {
        familyId: api.service.people.refreshTokens.newFamilyId(),
        clientId: appA.client_id,
        userId: userB.id,
        sessionHash: session.session.idHash,
        scope: 'deliveries:read',
        familyCreatedAt: new Date().toISOString(),
      },
      { jti: 'old-jti', expiresAtMs: Date.now() + 60_000 },
    )
    const refreshed = await tokenRequest(
      api,
      { grant_type: 'refresh_token', refresh_token: refreshToken },
      { id: appA.client_id, secret: appA.client_secret },
    )
    expect(refreshed).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    // And the family is revoked, not merely refused once.
    const row = await api.service.db
      .selectFrom('refresh_tokens')
      .select('revoked_at')
      .where('token_hash', '=', hashSecret(refreshToken))
      .executeTakeFirstOrThrow()
    expect(row.revoked_at).not.toBeNull()
  })
})
