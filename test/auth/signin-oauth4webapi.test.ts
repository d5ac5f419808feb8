import * as oauth from 'oauth4webapi'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allScopes } from '../../src/auth/scopes.js'
import { freePort } from '../helpers/child-service.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { PASSWORD } from './signin-fixtures.js'

/**
 * The whole sign-in flow over real HTTP, driven by an OAuth client library written by someone
 * else (oauth4webapi) and a browser that is nothing but fetch, a cookie jar and form posts: what a
 * third-party web app and a person without JavaScript would do.
 */

const REDIRECT = 'https://console.example/callback'

/** A browser without JavaScript over real HTTP: a cookie jar, forms parsed from the HTML, redirects followed by hand. */
function httpBrowser() {
  const jar = new Map<string, string>()
  async function go(url: string, init: { method: 'GET' | 'POST'; form?: Record<string, string> }) {
    const headers: Record<string, string> = {}
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    let body: string | undefined
    if (init.form) {
      headers['content-type'] = 'application/x-www-form-urlencoded'
      body = new URLSearchParams(init.form).toString()
    }
    const res = await fetch(url, { method: init.method, headers, body, redirect: 'manual' })
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(';')
      const eq = pair!.indexOf('=')
      const name = pair!.slice(0, eq).trim()
      const value = pair!.slice(eq + 1)
      if (/max-age=0/i.test(cookie) || value === '') jar.delete(name)
      else jar.set(name, value)
    }
    const text = await res.text()
    const location = res.headers.get('location')
    return { status: res.status, headers: res.headers, text, location: location ? new URL(location, url) : null }
  }
  return {
    jar,
    get: (url: string) => go(url, { method: 'GET' }),
    post: (url: string, form: Record<string, string>) => go(url, { method: 'POST', form }),
  }
}

/** The page's form: where it posts and its hidden inputs (the CSRF token among them), unescaped as a browser would. */
function parseForm(html: string, base: string) {
  const action = /<form[^>]*action="([^"]*)"/.exec(html)?.[1]
  const unescape = (s: string) =>
    s
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&')
  const fields: Record<string, string> = {}
  for (const m of html.matchAll(/<input[^>]*type="hidden"[^>]*>/g)) {
    const name = /name="([^"]*)"/.exec(m[0])?.[1]
    const value = /value="([^"]*)"/.exec(m[0])?.[1]
    if (name !== undefined) fields[name] = unescape(value ?? '')
  }
  return { action: action ? new URL(unescape(action), base).href : null, fields }
}

describe('sign-in end to end over HTTP with oauth4webapi and a cookie jar', () => {
  let api: TestApi
  let issuer: URL
  let client: oauth.Client
  const options = { [oauth.allowInsecureRequests]: true } // http on 127.0.0.1 in a test only

  beforeAll(async () => {
    const port = await freePort()
    const base = `http://127.0.0.1:${port}`
    api = await startTestService({ PORT: String(port), ISSUER: base, PASSWORD_SCRYPT_LOG2_N: '10' })
    await api.service.start()
    issuer = new URL(base)
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const user = await api.post('/v1/users', admin, {
      email: 'pat@example.com',
      name: 'Pat Pharmacist',
      role: 'pharmacist',
      pharmacy_id: pharmacy.id,
      password: PASSWORD,
    })
    expect(user.status).toBe(201)
    // A public client (no secret); new clients default to read-only scopes, so it names its own.
    const registered = await api.post('/v1/oauth/clients', admin, {
      client_name: 'Third-Party Console',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: allScopes.join(' '),
    })
    expect(registered.status).toBe(201)
    client = { client_id: registered.body.client_id as string }
  }, 60_000)
  afterAll(() => api?.stop())

  /** An API call with the library; a refusal comes back as its challenge error, whose response has the status. */
  async function call(accessToken: string, path: string): Promise<number> {
    try {
      return (await oauth.protectedResourceRequest(accessToken, 'GET', new URL(path, issuer), new Headers(), null, options)).status
    } catch (error) {
      if (error instanceof oauth.WWWAuthenticateChallengeError) return error.response.status
      throw error
    }
  }

  it('discovers, signs in through the form, exchanges the code, calls the API, rotates, and a replayed refresh token revokes the family', async () => {
    // Discovery (RFC 8414), checked by the library: the issuer in the document is the one asked for.
    const as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...options }))
    expect(as.authorization_endpoint).toBe(`${issuer.origin}/oauth/authorize`)
    expect(as.code_challenge_methods_supported).toContain('S256')

    const verifier = oauth.generateRandomCodeVerifier()
    const challenge = await oauth.calculatePKCECodeChallenge(verifier)
    const state = oauth.generateRandomState()
    const authorizationUrl = new URL(as.authorization_endpoint!)
    authorizationUrl.search = new URLSearchParams({
      response_type: 'code',
      client_id: client.client_id,
      redirect_uri: REDIRECT,
      scope: 'deliveries:read prescriptions:read',
      code_challenge: challenge,
      code_challenge_method: 'S256',
      state,
    }).toString()

    // The person: the sign-in page, then the form posted back with its CSRF token and the password.
    const b = httpBrowser()
    const page = await b.get(authorizationUrl.href)
    expect(page.status).toBe(200)
    expect(page.text).toContain('Third-Party Console')
    const form = parseForm(page.text, authorizationUrl.href)
    expect(form.fields.csrf_token).toBeTruthy()
    expect(b.jar.has('rxtrace_csrf')).toBe(true)
    let step = await b.post(form.action!, { ...form.fields, email: 'pat@example.com', password: PASSWORD })
    // Follow redirects by hand until one leaves for the app's redirect URI (a first-party app: no consent page).
    for (let hops = 0; step.location && !step.location.href.startsWith(REDIRECT) && hops < 5; hops++) step = await b.get(step.location.href)
    expect([302, 303]).toContain(step.status)
    expect(b.jar.has('rxtrace_session')).toBe(true)
    const callback = step.location!
    expect(callback.href.startsWith(REDIRECT)).toBe(true)

    // The app: the library checks `iss` (RFC 9207) and `state`, then redeems the code as a public client.
    const params = oauth.validateAuthResponse(as, client, callback, state)
    const codeResponse = await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, REDIRECT, verifier, options)
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, codeResponse)
    expect(tokens.token_type.toLowerCase()).toBe('bearer')
    expect(tokens.scope!.split(' ').sort()).toEqual(['deliveries:read', 'prescriptions:read'])
    expect(tokens.refresh_token).toBeTruthy()

    // A tampered `iss` or `state` is refused by the library before any code is spent.
    const forged = new URL(callback)
    forged.searchParams.set('iss', 'https://evil.example')
    expect(() => oauth.validateAuthResponse(as, client, forged, state)).toThrow()
    expect(() => oauth.validateAuthResponse(as, client, callback, oauth.generateRandomState())).toThrow()

    // The access token works on an API route over HTTP.
    expect(await call(tokens.access_token, '/v1/deliveries')).toBe(200)
    // Not a scope it was given: the library reports the server's Bearer challenge (RFC 6750 insufficient_scope).
    expect(await call(tokens.access_token, '/v1/users')).toBe(403)

    // Rotation: the refresh token is exchanged for a new pair.
    const first = tokens.refresh_token!
    const rotated = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.None(), first, options),
    )
    expect(rotated.refresh_token).toBeTruthy()
    expect(rotated.refresh_token).not.toBe(first)
    const second = rotated.refresh_token!
    expect(await call(rotated.access_token, '/v1/deliveries')).toBe(200)

    // Replay of the rotated token: invalid_grant ...
    const replay = oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.None(), first, options),
    )
    await expect(replay).rejects.toBeInstanceOf(oauth.ResponseBodyError)
    await expect(replay).rejects.toMatchObject({ error: 'invalid_grant', status: 400 })
    // ... and the family is revoked: the newer refresh token and the access tokens it issued are dead too.
    const after = oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, oauth.None(), second, options),
    )
    await expect(after).rejects.toMatchObject({ error: 'invalid_grant' })
    expect(await call(rotated.access_token, '/v1/deliveries')).toBe(401)
    expect(await call(tokens.access_token, '/v1/deliveries')).toBe(401)
  }, 60_000)
})
