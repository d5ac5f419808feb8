/** What the SDK needs from a token source: a valid access token, and a way to drop one the API refused. */
export interface TokenSource {
  token(): Promise<string>
  /** The API answered 401 with this token (revoked, key rotated): the next call gets a new one. */
  invalidate(token: string): void
}

export interface ClientCredentialsOptions {
  /** The service's base URL (its OAuth issuer), e.g. `https://api.rxtrace.example`. */
  baseUrl: string
  clientId: string
  clientSecret: string
  /** Space-separated scopes; without it the token carries every scope of the client (RFC 6749 §3.3). */
  scope?: string
  /** Renew this many seconds before the token expires (default 60), so no request leaves with a token about to lapse. */
  renewBeforeS?: number
  fetch?: typeof fetch
  /** Milliseconds since the epoch; a test moves it. */
  now?: () => number
}

export class TokenRequestError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    description: string | undefined,
  ) {
    super(`token request failed: ${status} ${error}${description ? `: ${description}` : ''}`)
    this.name = 'TokenRequestError'
  }
}

/** RFC 6749 §2.3.1: the client id and secret are form-encoded before they are put in the Basic header. */
const formEncode = (s: string) => encodeURIComponent(s).replace(/%20/g, '+')
const base64 = (s: string) => btoa(String.fromCharCode(...new TextEncoder().encode(s)))

/**
 * The client_credentials grant with `client_secret_basic`: one token is cached and shared by every
 * request until `renewBeforeS` before it expires; while one token request is in flight, every
 * caller waits for that one (no stampede at expiry).
 */
export class ClientCredentials implements TokenSource {
  private cached: { token: string; renewAt: number } | undefined
  private inFlight: Promise<string> | undefined
  private readonly fetch: typeof fetch
  private readonly now: () => number
  /** How many token requests were sent: a test and a dashboard can watch renewal. */
  requests = 0

  constructor(private readonly options: ClientCredentialsOptions) {
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis)
    this.now = options.now ?? Date.now
  }

  token(): Promise<string> {
    if (this.cached && this.now() < this.cached.renewAt) return Promise.resolve(this.cached.token)
    this.inFlight ??= this.request().finally(() => {
      this.inFlight = undefined
    })
    return this.inFlight
  }

  invalidate(token: string): void {
    if (this.cached?.token === token) this.cached = undefined
  }

  private async request(): Promise<string> {
    const { baseUrl, clientId, clientSecret, scope, renewBeforeS = 60 } = this.options
    const form = new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) })
    const startedAt = this.now()
    this.requests++
    const res = await this.fetch(new URL('/oauth/token', baseUrl), {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${base64(`${formEncode(clientId)}:${formEncode(clientSecret)}`)}`,
      },
      body: form.toString(),
    })
    const body = (await res.json().catch(() => ({}))) as {
      access_token?: string
      expires_in?: number
      error?: string
      error_description?: string
    }
    if (!res.ok || !body.access_token) throw new TokenRequestError(res.status, body.error ?? 'invalid_response', body.error_description)
    // Counted from when the request left: the token's lifetime started no earlier than that.
    const lifetimeMs = (body.expires_in ?? 900) * 1000
    this.cached = { token: body.access_token, renewAt: startedAt + Math.max(lifetimeMs - renewBeforeS * 1000, lifetimeMs / 2) }
    return body.access_token
  }
}

/** A token you already have (from the PKCE helper, a test, a secret store); never renewed. */
export function staticToken(token: string): TokenSource {
  return { token: () => Promise.resolve(token), invalidate: () => {} }
}
