import { createHash, randomBytes } from 'node:crypto'
import { ApiError, type ApiClient } from './api-client.js'
import type { DeliveryView } from './driver.js'

/**
 * A pharmacist, simulated: registered by the admin with a password, signed in through the
 * service's sign-in page as a browser would (authorization code with PKCE S256, no JavaScript),
 * and recording dispositions signed with that password (docs/part11.md). A machine client
 * cannot sign, so the decision is a person's.
 */

export const REDIRECT = 'https://pharmacist.example/callback'

export class Pharmacist {
  private constructor(
    private readonly baseUrl: string,
    private readonly accessToken: string,
    private readonly password: string,
    readonly name: string,
  ) {}

  /** Registers a pharmacist of `pharmacyId` (and a first-party app to sign in with) through `admin`, then signs them in. */
  static async register(admin: ApiClient, pharmacyId: string, name = 'Pat Pharmacist'): Promise<Pharmacist> {
    const password = randomBytes(18).toString('base64url')
    const email = `pharmacist-${randomBytes(4).toString('hex')}@pharmacy.example`
    await admin.post('/v1/users', { email, name, role: 'pharmacist', pharmacy_id: pharmacyId, password })
    const app = await admin.post<{ client_id: string }>('/v1/oauth/clients', {
      client_name: 'Pharmacist app (simulated)',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: 'deliveries:read cold-chain:disposition',
    })
    return new Pharmacist(admin.baseUrl, await signIn(admin.baseUrl, app.client_id, email, password), password, name)
  }

  /** The decision on a broken cold chain, signed with the password entered again (meaning `released` or `returned`). */
  async disposition(deliveryId: string, decision: 'release' | 'return', note: string): Promise<DeliveryView> {
    const signature = { meaning: decision === 'release' ? 'released' : 'returned', password: this.password }
    const res = await fetch(new URL(`/v1/deliveries/${deliveryId}/disposition`, this.baseUrl), {
      method: 'POST',
      headers: { authorization: `Bearer ${this.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ decision, note, signature }),
    })
    const text = await res.text()
    if (!res.ok) throw new ApiError(res.status, text ? JSON.parse(text) : null, `POST /v1/deliveries/${deliveryId}/disposition`)
    return JSON.parse(text) as DeliveryView
  }
}

/** The sign-in page's form posted as a browser would; answers the person's access token. */
export async function signIn(baseUrl: string, clientId: string, email: string, password: string): Promise<string> {
  const { code, verifier } = await authorizationCode(baseUrl, clientId, email, password)
  const token = await fetch(`${baseUrl}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: REDIRECT,
      code_verifier: verifier,
      client_id: clientId,
    }),
  })
  const body = (await token.json()) as { access_token?: string }
  if (!body.access_token) throw new Error(`pharmacist token: ${token.status}`)
  return body.access_token
}

/**
 * A browser without JavaScript (a cookie jar and the form's hidden fields) signs in on the sign-in
 * page with PKCE; answers the authorization code and its verifier, for the caller to exchange.
 */
export async function authorizationCode(
  baseUrl: string,
  clientId: string,
  email: string,
  password: string,
  scope?: string,
): Promise<{ code: string; verifier: string }> {
  const jar = new Map<string, string>()
  const keep = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';')
      const eq = pair!.indexOf('=')
      jar.set(pair!.slice(0, eq), pair!.slice(eq + 1))
    }
  }
  const cookie = () => [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
  const verifier = randomBytes(32).toString('base64url')
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: randomBytes(8).toString('hex'),
    ...(scope ? { scope } : {}),
  })
  const page = await fetch(`${baseUrl}/oauth/authorize?${query}`, { redirect: 'manual' })
  keep(page)
  const html = await page.text()
  if (page.status !== 200) throw new Error(`sign-in page: ${page.status} ${html.slice(0, 200)}`)
  const form: Record<string, string> = {}
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g))
    form[m[1]!] = m[2]!
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&')
  const signedIn = await fetch(`${baseUrl}/oauth/authorize`, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
    body: new URLSearchParams({ ...form, email, password }).toString(),
  })
  await signedIn.text()
  const code = signedIn.headers.get('location') ? new URL(signedIn.headers.get('location')!).searchParams.get('code') : null
  if (signedIn.status !== 303 || !code) throw new Error(`sign-in failed: ${signedIn.status}`)
  return { code, verifier }
}
