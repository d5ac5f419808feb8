import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { beginSignIn, completeSignIn, createRxtraceClient, signedInTokens, SignInError, type SignInClient, type Tokens } from '@rxtrace/sdk'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

const PASSWORD = 'correct horse battery staple'

describe('browser sign-in with PKCE against the real service', () => {
  let api: TestApi
  let baseUrl: string
  let client: SignInClient
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService({ PASSWORD_SCRYPT_LOG2_N: '10' }))
    const admin = createRxtraceClient({ baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const pharmacy = await api.pharmacy(await api.adminToken())
    await admin.api.POST('/v1/users', {
      body: { email: 'pat@example.com', name: 'Pat Pharmacist', role: 'pharmacist', pharmacy_id: pharmacy.id, password: PASSWORD },
    })
    const registered = await admin.api.POST('/v1/oauth/clients', {
      body: {
        client_name: 'Pharmacy web app',
        token_endpoint_auth_method: 'none',
        redirect_uris: ['https://app.example/callback'],
        first_party: true,
        scope: 'deliveries:read pharmacies:read',
      },
    })
    // The service announces ISSUER (http://rxtrace.test in tests) as `iss`, not the address it listens on.
    client = { baseUrl, clientId: registered.data!.client_id, redirectUri: 'https://app.example/callback', issuer: 'http://rxtrace.test' }
  })
  afterAll(() => api?.stop())

  /** What the browser does between the two steps: the sign-in page, the form, the redirect. */
  async function browserSignIn(url: string): Promise<string> {
    const page = await fetch(url)
    expect(page.status).toBe(200)
    const cookie = page.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ')
    const html = await page.text()
    const hidden = Object.fromEntries(
      [...html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!.replace(/&amp;/g, '&')]),
    )
    const done = await fetch(`${baseUrl}/oauth/authorize`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...hidden, email: 'pat@example.com', password: PASSWORD }).toString(),
    })
    expect(done.status).toBe(303)
    return done.headers.get('location')!
  }

  it('signs a person in and calls the API with their token, refreshed before it expires', async () => {
    const started = await beginSignIn(client, 'deliveries:read')
    expect(new URL(started.url).searchParams.get('code_challenge_method')).toBe('S256')
    const callback = await browserSignIn(started.url)
    expect(callback.startsWith('https://app.example/callback?')).toBe(true)
    const tokens = await completeSignIn(client, callback, started)
    expect(tokens.refresh_token).toBeTruthy()

    let now = Date.now()
    const rotated: Tokens[] = []
    const rx = createRxtraceClient({
      baseUrl,
      auth: signedInTokens(
        client,
        tokens,
        (t) => rotated.push(t),
        () => now,
      ),
    })
    expect((await rx.api.GET('/v1/deliveries')).response.status).toBe(200)
    expect(rotated).toHaveLength(0)
    now += 14.5 * 60_000 // in the token's last minute: refreshed first
    expect((await rx.api.GET('/v1/deliveries')).response.status).toBe(200)
    expect(rotated).toHaveLength(1)
    expect(rotated[0]!.refresh_token).not.toBe(tokens.refresh_token) // rotated on every use
  })

  it('refuses an answer that does not carry its state, and a code used twice', async () => {
    const started = await beginSignIn(client)
    const callback = await browserSignIn(started.url)
    await expect(completeSignIn(client, callback, { ...started, state: 'another sign-in' })).rejects.toThrow(SignInError)
    await expect(completeSignIn({ ...client, issuer: 'https://evil.example' }, callback, started)).rejects.toMatchObject({
      error: 'issuer_mismatch',
    })
    await completeSignIn(client, callback, started)
    await expect(completeSignIn(client, callback, started)).rejects.toMatchObject({ error: 'invalid_grant' })
  })

  it('refuses an answer without iss, or with another one, before spending the code (RFC 9207 §2.4)', async () => {
    const started = await beginSignIn(client)
    const callback = new URL(await browserSignIn(started.url))
    expect(callback.searchParams.get('iss')).toBe('http://rxtrace.test') // the service always sends it, and says so in its metadata
    const withIss = (iss: string | null) => {
      const url = new URL(callback)
      if (iss === null) url.searchParams.delete('iss')
      else url.searchParams.set('iss', iss)
      return url.toString()
    }
    await expect(completeSignIn(client, withIss(null), started)).rejects.toMatchObject({ error: 'issuer_mismatch' })
    await expect(completeSignIn(client, withIss('https://evil.example'), started)).rejects.toMatchObject({ error: 'issuer_mismatch' })
    // An error answer without iss is refused the same way: it may come from a mix-up attacker.
    const error = new URL('https://app.example/callback')
    error.search = new URLSearchParams({ error: 'access_denied', state: started.state }).toString()
    await expect(completeSignIn(client, error.toString(), started)).rejects.toMatchObject({ error: 'issuer_mismatch' })
    // The code was not spent by the refusals: the genuine answer still signs in.
    expect((await completeSignIn(client, callback.toString(), started)).access_token).toBeTruthy()
  })
})
