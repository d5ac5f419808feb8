/**
 * Sign-in for browser apps: OAuth 2.0 authorization code with PKCE S256 (RFC 7636) for a public
 * client (`token_endpoint_auth_method: none`). WebCrypto, fetch and URL only: no Node API.
 * Keep the verifier and state in sessionStorage between the two steps, never the tokens in
 * localStorage.
 */
import type { TokenSource } from './tokens.js'

export interface SignInClient {
  /** The service's base URL, e.g. `https://api.rxtrace.example`. */
  baseUrl: string
  clientId: string
  /** Exactly as registered on the client. */
  redirectUri: string
  /** The `iss` the service announces (its ISSUER); defaults to `baseUrl`. RFC 9207 checks it. */
  issuer?: string
  fetch?: typeof fetch
}

export interface Tokens {
  access_token: string
  refresh_token?: string
  expires_in: number
  scope?: string
  token_type: string
}

export class SignInError extends Error {
  constructor(
    readonly error: string,
    description?: string | null,
  ) {
    super(description ? `${error}: ${description}` : error)
    this.name = 'SignInError'
  }
}

const base64url = (bytes: Uint8Array) =>
  btoa(String.fromCharCode(...bytes))
    .replace(/\+/g, '-')
    .replace(/\//g, '_')
    .replace(/=+$/, '')
const random = (n: number) => base64url(crypto.getRandomValues(new Uint8Array(n)))

/** RFC 7636 §4.1–4.2: 32 random bytes as the verifier, its SHA-256 as the S256 challenge. */
export async function createPkcePair(): Promise<{ verifier: string; challenge: string }> {
  const verifier = random(32)
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier))
  return { verifier, challenge: base64url(new Uint8Array(digest)) }
}

/** Step 1: where to send the browser, and the `state` and `verifier` to keep until it comes back. */
export async function beginSignIn(client: SignInClient, scope?: string): Promise<{ url: string; state: string; verifier: string }> {
  const { verifier, challenge } = await createPkcePair()
  const state = random(16)
  const url = new URL('/oauth/authorize', client.baseUrl)
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: client.clientId,
    redirect_uri: client.redirectUri,
    state,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    ...(scope ? { scope } : {}),
  }).toString()
  return { url: url.toString(), state, verifier }
}

/**
 * Step 2, on the redirect URI: checks `state` (CSRF) and `iss` (RFC 9207: the answer comes from
 * the server you sent the browser to; required, since the service always sends it), then trades
 * the code and the verifier for tokens.
 */
export async function completeSignIn(
  client: SignInClient,
  callbackUrl: string,
  kept: { state: string; verifier: string },
): Promise<Tokens> {
  const params = new URL(callbackUrl).searchParams
  if (params.get('state') !== kept.state) throw new SignInError('state_mismatch', 'the answer does not belong to this sign-in')
  // RFC 9207 §2.4: the service advertises authorization_response_iss_parameter_supported, so an
  // answer without iss (error answers included) is refused like one naming another server.
  const iss = params.get('iss')
  if (iss === null) throw new SignInError('issuer_mismatch', 'the answer does not say which server sent it (no iss)')
  if (iss !== (client.issuer ?? new URL(client.baseUrl).origin)) throw new SignInError('issuer_mismatch', `unexpected iss ${iss}`)
  if (params.get('error')) throw new SignInError(params.get('error')!, params.get('error_description'))
  const code = params.get('code')
  if (!code) throw new SignInError('invalid_response', 'no code in the redirect')
  return tokenRequest(client, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: client.redirectUri,
    code_verifier: kept.verifier,
    client_id: client.clientId,
  })
}

/** A refresh token is single-use: the answer carries the next one; keep it, drop the old. */
export function refreshSignIn(client: SignInClient, refreshToken: string): Promise<Tokens> {
  return tokenRequest(client, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.clientId })
}

async function tokenRequest(client: SignInClient, form: Record<string, string>): Promise<Tokens> {
  const doFetch = client.fetch ?? globalThis.fetch.bind(globalThis)
  const res = await doFetch(new URL('/oauth/token', client.baseUrl), {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(form).toString(),
  })
  const body = (await res.json().catch(() => ({}))) as Partial<Tokens> & { error?: string; error_description?: string }
  if (!res.ok || !body.access_token) throw new SignInError(body.error ?? 'invalid_response', body.error_description)
  return body as Tokens
}

/**
 * A token source for createRxtraceClient in the browser: the signed-in person's access token,
 * refreshed (one request at a time) shortly before it expires; `onTokens` hears each new pair so
 * the app can keep the refresh token (in memory or sessionStorage).
 */
export function signedInTokens(
  client: SignInClient,
  first: Tokens,
  onTokens?: (tokens: Tokens) => void,
  now: () => number = Date.now,
): TokenSource {
  let current = first
  let renewAt = now() + Math.max(current.expires_in - 60, current.expires_in / 2) * 1000
  let inFlight: Promise<string> | undefined
  const renew = async () => {
    if (!current.refresh_token) throw new SignInError('login_required', 'the access token expired and there is no refresh token')
    const next = await refreshSignIn(client, current.refresh_token)
    current = next
    renewAt = now() + Math.max(next.expires_in - 60, next.expires_in / 2) * 1000
    onTokens?.(next)
    return next.access_token
  }
  return {
    token() {
      if (now() < renewAt) return Promise.resolve(current.access_token)
      inFlight ??= renew().finally(() => {
        inFlight = undefined
      })
      return inFlight
    },
    invalidate(token) {
      if (token === current.access_token) renewAt = 0
    },
  }
}
