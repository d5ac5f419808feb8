// Sign-in through the service's authorization server: authorization_code + PKCE S256 (RFC 7636)
// with the console's first-party public client. Tokens live in this module's memory only — never
// localStorage or sessionStorage — so a reload signs in again, silently while the
// authorization server's session cookie is alive (it redirects straight back with a code).
// sessionStorage holds only the one-time PKCE verifier and state across that redirect.

const CLIENT_ID = 'cl_console'
const SCOPE = 'pharmacies:read prescriptions:read deliveries:read telemetry:read cold-chain:disposition audit:read'
const PENDING = 'rxtrace.console.pending'

export type Session = { accessToken: string; scopes: Set<string>; sub: string; pharmacyId: string | null; expiresAt: number }

let session: Session | null = null
let refreshToken: string | null = null
let refreshing: Promise<void> | null = null

const redirectUri = () => `${location.origin}/console/`

function b64url(bytes: ArrayBuffer | Uint8Array): string {
  const b = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)
  let s = ''
  for (const byte of b) s += String.fromCharCode(byte)
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

const random = (n: number) => b64url(crypto.getRandomValues(new Uint8Array(n)))

/** Sends the browser to /oauth/authorize; comes back to /console/ with a code. */
export async function signIn(): Promise<never> {
  const verifier = random(32)
  const state = random(16)
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)))
  sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, back: location.hash || '#/' }))
  const params = new URLSearchParams({
    response_type: 'code',
    client_id: CLIENT_ID,
    redirect_uri: redirectUri(),
    scope: SCOPE,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  })
  location.assign(`/oauth/authorize?${params}`)
  return new Promise<never>(() => {})
}

function claimsOf(jwt: string): Record<string, unknown> {
  // Read for display and routing only; the service checks every token it is sent.
  const part = jwt.split('.')[1] ?? ''
  return JSON.parse(atob(part.replace(/-/g, '+').replace(/_/g, '/'))) as Record<string, unknown>
}

async function tokenRequest(form: Record<string, string>): Promise<void> {
  const res = await fetch('/oauth/token', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ client_id: CLIENT_ID, ...form }),
  })
  const body = (await res.json()) as Record<string, string | number>
  if (!res.ok) throw new Error(String(body.error_description ?? body.error ?? res.status))
  const claims = claimsOf(String(body.access_token))
  session = {
    accessToken: String(body.access_token),
    scopes: new Set(
      String(body.scope ?? '')
        .split(' ')
        .filter(Boolean),
    ),
    sub: String(claims.sub),
    pharmacyId: typeof claims.pharmacy_id === 'string' ? claims.pharmacy_id : null,
    expiresAt: Date.now() + Number(body.expires_in ?? 900) * 1000,
  }
  refreshToken = typeof body.refresh_token === 'string' ? body.refresh_token : null
}

/**
 * Finishes a sign-in that came back with a code (checks state and RFC 9207 `iss`), or starts one.
 * Resolves once a token is in memory; returns the hash route to show.
 */
export async function ensureSignedIn(): Promise<string> {
  const query = new URLSearchParams(location.search)
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? 'null') as { verifier: string; state: string; back: string } | null
  if (query.has('error')) {
    sessionStorage.removeItem(PENDING)
    history.replaceState(null, '', '/console/')
    throw new Error(`Sign-in failed: ${query.get('error_description') ?? query.get('error')}`)
  }
  if (query.has('code') && pending) {
    sessionStorage.removeItem(PENDING)
    history.replaceState(null, '', `/console/${pending.back}`)
    if (query.get('state') !== pending.state) throw new Error('Sign-in failed: the answer does not belong to this page (state).')
    // RFC 9207 §2.4: the service always sends iss (its metadata says so): an answer without it is refused too.
    const iss = query.get('iss')
    if (iss === null) throw new Error('Sign-in failed: the answer does not say which server sent it (iss).')
    if (iss !== location.origin) {
      const meta = (await (await fetch('/.well-known/oauth-authorization-server')).json()) as { issuer: string }
      if (iss !== meta.issuer) throw new Error('Sign-in failed: the answer came from another issuer.')
    }
    await tokenRequest({
      grant_type: 'authorization_code',
      code: query.get('code')!,
      redirect_uri: redirectUri(),
      code_verifier: pending.verifier,
    })
    return pending.back
  }
  return signIn()
}

/** The access token, renewed with the (rotating) refresh token a minute before it expires. */
export async function accessToken(): Promise<string> {
  if (session && session.expiresAt - Date.now() > 60_000) return session.accessToken
  if (refreshToken) {
    refreshing ??= tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken }).finally(() => {
      refreshing = null
    })
    try {
      await refreshing
      return session!.accessToken
    } catch {
      /* a revoked family: sign in again */
    }
  }
  return signIn()
}

export const current = () => session
export const can = (scope: string) => session?.scopes.has(scope) ?? false
