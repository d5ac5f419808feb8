import { allScopes } from '../../src/auth/scopes.js'
import { authorizeUrl, browser, pkce } from './browser.js'
import type { TestApi } from './service.js'

const REDIRECT = 'https://app.example/callback'

/**
 * The access token of a person who signs in: a user with `role` (created by `admin`) goes
 * through the sign-in page of a first-party app and exchanges the code, as the console does.
 * Start the service with `PASSWORD_SCRYPT_LOG2_N: '10'` to keep the password hashing quick.
 */
export async function signedInToken(
  api: TestApi,
  admin: string,
  user: { role: string; pharmacy_id?: string; fleet_id?: string; driver_id?: string },
): Promise<string> {
  return (await signedInPerson(api, admin, user)).token
}

/** As signedInToken, with what a test of e-signatures needs besides: who, the password, the refresh token and the app. */
export async function signedInPerson(
  api: TestApi,
  admin: string,
  user: { role: string; pharmacy_id?: string; fleet_id?: string; driver_id?: string; name?: string },
) {
  const email = `${user.role}-${Math.random().toString(36).slice(2)}@example.com`
  const password = 'a long enough test password'
  const created = await api.post('/v1/users', admin, { email, name: `A ${user.role}`, password, ...user })
  if (created.status !== 201) throw new Error(`user: ${created.status} ${created.text}`)
  const app = await api.post('/v1/oauth/clients', admin, {
    client_name: 'Signed-in app',
    token_endpoint_auth_method: 'none',
    redirect_uris: [REDIRECT],
    first_party: true,
    scope: allScopes.join(' '), // the role caps what the person's token holds
  })
  if (app.status !== 201) throw new Error(`client: ${app.status} ${app.text}`)
  const b = browser(api.service)
  const { verifier, challenge } = pkce()
  const form = await b.get(authorizeUrl({ client_id: app.body.client_id, redirect_uri: REDIRECT, code_challenge: challenge }))
  const done = await b.post('/oauth/authorize', { ...form.form, email, password })
  const code = done.location?.searchParams.get('code')
  if (!code) throw new Error(`sign-in: ${done.status} ${done.text.slice(0, 200)}`)
  const res = await api.service.app.request('/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: app.body.client_id,
    }).toString(),
  })
  const body = (await res.json()) as { access_token?: string; refresh_token?: string }
  if (!body.access_token) throw new Error(`token: ${res.status} ${JSON.stringify(body)}`)
  return {
    token: body.access_token,
    refreshToken: body.refresh_token ?? null,
    clientId: app.body.client_id as string,
    user: created.body as { id: string; email: string; name: string },
    email,
    password,
    browser: b,
  }
}
