import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { browser, pkce } from '../helpers/browser.js'
import type { TestApi } from '../helpers/service.js'
import { REDIRECT, signIn, signInWorld, tokenRequest } from './signin-fixtures.js'

/** RFC 7009: a refresh token revoked at /oauth/revoke refreshes no more, and takes its family with it. */
describe('revoking a refresh token', () => {
  let world: Awaited<ReturnType<typeof signInWorld>>
  let api: TestApi
  let app: { client_id: string; client_secret: string }
  beforeAll(async () => {
    world = await signInWorld()
    api = world.api
    app = (
      await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'Refill Reminders Inc.',
        grant_types: ['authorization_code', 'refresh_token'],
        redirect_uris: [REDIRECT],
        first_party: true,
        scope: 'deliveries:read',
      })
    ).body
  })
  afterAll(() => api.stop())

  /** Signs Pat in through `clientId`; answers the token response. */
  async function signedIn(clientId: string, secret?: string) {
    const { verifier, challenge } = pkce()
    const done = await signIn(browser(api.service), { client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge })
    const form = {
      grant_type: 'authorization_code',
      code: done.location!.searchParams.get('code')!,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
    }
    const res = secret ? await tokenRequest(api, form, { id: clientId, secret }) : await tokenRequest(api, { ...form, client_id: clientId })
    expect(res.status).toBe(200)
    return res.body as { access_token: string; refresh_token: string }
  }

  const revoke = (form: Record<string, string>, basic?: { id: string; secret: string }) => {
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' }
    if (basic) headers.authorization = `Basic ${Buffer.from(`${basic.id}:${basic.secret}`).toString('base64')}`
    return api.service.app.request('/oauth/revoke', { method: 'POST', headers, body: new URLSearchParams(form).toString() })
  }

  it('a confidential client revokes its refresh token: it no longer refreshes, and the access tokens of its family stop working', async () => {
    const basic = { id: app.client_id, secret: app.client_secret }
    const first = await signedIn(app.client_id, app.client_secret)
    // One rotation first: the family now has a spent member and a live one.
    const rotated = (await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: first.refresh_token }, basic)).body
    expect((await api.get('/v1/deliveries', rotated.access_token)).status).toBe(200)

    expect((await revoke({ token: rotated.refresh_token, token_type_hint: 'refresh_token' }, basic)).status).toBe(200)
    const again = await tokenRequest(api, { grant_type: 'refresh_token', refresh_token: rotated.refresh_token }, basic)
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
    expect((await api.get('/v1/deliveries', rotated.access_token)).status).toBe(401)
  })

  it('without a hint too, and a public client revokes its own by naming itself', async () => {
    const tokens = await signedIn(world.client.client_id)
    expect((await revoke({ token: tokens.refresh_token, client_id: world.client.client_id })).status).toBe(200)
    const again = await tokenRequest(api, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
      client_id: world.client.client_id,
    })
    expect(again).toMatchObject({ status: 400, body: { error: 'invalid_grant' } })
  })

  it("another client's refresh token is answered 200 and left alone (RFC 7009 §2.1)", async () => {
    const tokens = await signedIn(world.client.client_id)
    expect((await revoke({ token: tokens.refresh_token }, { id: app.client_id, secret: app.client_secret })).status).toBe(200)
    const still = await tokenRequest(api, {
      grant_type: 'refresh_token',
      refresh_token: tokens.refresh_token,
      client_id: world.client.client_id,
    })
    expect(still.status).toBe(200)
  })
})
