import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

/**
 * Changing what a person may do (a new role, above all a demotion) ends what they hold, as
 * disabling does: their sessions, refresh tokens and the access tokens those issued, and any
 * code not yet exchanged.
 */
describe('changing a user’s role', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
  })
  afterAll(() => api.stop())

  const newPharmacist = async (email: string) =>
    (
      await api.post('/v1/users', world.admin, {
        email,
        name: email,
        role: 'pharmacist',
        pharmacy_id: world.pharmacy.id,
        password: 'a long and unusual pass phrase',
      })
    ).body as { id: string }

  async function signedIn(email: string) {
    const b = browser(api.service)
    const { verifier, challenge } = pkce()
    const done = await signIn(
      b,
      { client_id: world.client.client_id, redirect_uri: REDIRECT, code_challenge: challenge },
      email,
      'a long and unusual pass phrase',
    )
    expect(done.status).toBe(303)
    return { browser: b, code: done.location!.searchParams.get('code')!, verifier }
  }
  const exchange = ({ code, verifier }: { code: string; verifier: string }) =>
    tokenRequest(api, {
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: world.client.client_id,
    })

  it('a demotion ends the sessions, revokes the refresh tokens and their access tokens, and spoils a code not yet exchanged', async () => {
    const user = await newPharmacist('demoted@example.com')
    const first = await signedIn('demoted@example.com')
    const tokens = (await exchange(first)).body
    expect(tokens.scope).toContain('audit:read')
    const pending = await signedIn('demoted@example.com') // a code issued under the old role, not yet exchanged

    const patched = await api.request('PATCH', `/v1/users/${user.id}`, { token: world.admin, body: { role: 'technician' } })
    expect(patched).toMatchObject({ status: 200, body: { role: 'technician' } })

    const refreshed = await tokenRequest(api, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
      client_id: world.client.client_id,
    })
    expect(refreshed).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    expect((await api.get('/v1/audit-events', tokens.access_token)).status).toBe(401)
    expect(await api.service.people.sessions.resume(first.browser.jar.get('rxtrace_session'))).toBeNull()
    expect((await exchange(pending)).body.error).toBe('invalid_grant')

    // Signing in again gives the new role's scopes.
    const again = (await exchange(await signedIn('demoted@example.com'))).body
    expect(again.scope).not.toContain('audit:read')
  })

  it('a PATCH that leaves the role as it was (a new name) ends nothing', async () => {
    const user = await newPharmacist('renamed@example.com')
    const tokens = (await exchange(await signedIn('renamed@example.com'))).body
    await api.request('PATCH', `/v1/users/${user.id}`, { token: world.admin, body: { name: 'Renamed', role: 'pharmacist' } })
    const refreshed = await tokenRequest(api, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
      client_id: world.client.client_id,
    })
    expect(refreshed.status).toBe(200)
  })
})
