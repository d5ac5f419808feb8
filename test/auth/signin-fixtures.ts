import { allScopes } from '../../src/auth/scopes.js'
import { expect } from 'vitest'
import { authorizeUrl, browser, pkce, type Browser } from '../helpers/browser.js'
import type { ServiceOverrides } from '../../src/service.js'
import { startTestService, type TestApi } from '../helpers/service.js'

export const PASSWORD = 'correct horse battery staple'
export const REDIRECT = 'https://console.example/callback'

/** A service with a pharmacy, a pharmacist who has a password, and a first-party public client. */
export async function signInWorld(env: Record<string, string> = {}, overrides: ServiceOverrides = {}) {
  const api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10', ...env }, overrides)
  const admin = await api.adminToken()
  const pharmacy = await api.pharmacy(admin)
  const user = (
    await api.post('/v1/users', admin, {
      email: 'Pat@Example.com',
      name: 'Pat Pharmacist',
      role: 'pharmacist',
      pharmacy_id: pharmacy.id,
      password: PASSWORD,
    })
  ).body
  const client = (
    await api.post('/v1/oauth/clients', admin, {
      client_name: 'Pharmacist Console',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: allScopes.join(' '), // a person's token is capped by the role; the app may ask for anything
    })
  ).body
  return { api, admin, pharmacy, user, client }
}

/** Form-encoded POST to the token endpoint. */
export async function tokenRequest(api: TestApi, form: Record<string, string>, basic?: { id: string; secret: string }) {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' }
  if (basic) headers.authorization = `Basic ${Buffer.from(`${basic.id}:${basic.secret}`).toString('base64')}`
  const res = await api.service.app.request('/oauth/token', { method: 'POST', headers, body: new URLSearchParams(form).toString() })
  return { status: res.status, body: (await res.json()) as Record<string, any> }
}

/** Opens /oauth/authorize and signs in through the form; returns the page or redirect that follows. */
export async function signIn(b: Browser, params: Record<string, string>, email = 'pat@example.com', password = PASSWORD) {
  const form = await b.get(authorizeUrl(params))
  expect(form.status).toBe(200)
  return b.post('/oauth/authorize', { ...form.form, email, password })
}

/** The whole browser leg for a first-party client: returns the code and the verifier. */
export async function codeFor(api: TestApi, clientId: string, b: Browser = browser(api.service)) {
  const { verifier, challenge } = pkce()
  const done = await signIn(b, { client_id: clientId, redirect_uri: REDIRECT, code_challenge: challenge, scope: '' })
  expect(done.status).toBe(303)
  return { code: done.location!.searchParams.get('code')!, verifier, browser: b, location: done.location! }
}
