import { randomUUID } from 'node:crypto'

/**
 * A small client of the rxtrace REST API for the simulators: client-credentials token (RFC 6749
 * §4.4) renewed before it expires, JSON in and out, and an Idempotency-Key on every POST so a
 * retried request never creates a second resource.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly problem: { code?: string; detail?: string; errors?: { pointer: string; message: string }[] } | null,
    what: string,
  ) {
    const detail = problem?.errors?.map((e) => `${e.pointer} ${e.message}`).join('; ') || problem?.detail || ''
    super(`${what}: ${status} ${problem?.code ?? ''} ${detail}`.trim())
  }
}

// Renew this long before `expires_in` runs out, so a request never carries an expired token.
const RENEW_EARLY_MS = 30_000

export class ApiClient {
  private token: { value: string; expiresAt: number } | null = null

  constructor(
    readonly baseUrl: string,
    private readonly clientId: string,
    private readonly clientSecret: string,
  ) {}

  async get<T = any>(path: string): Promise<T> {
    return this.request<T>('GET', path)
  }

  async post<T = any>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, body)
  }

  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const text = await this.send(method, path, body)
    return (text ? safeJson(text) : null) as T
  }

  /** A GET whose answer is not JSON (the SVG chart, the CSV trace). */
  async text(path: string, accept = '*/*'): Promise<string> {
    return this.send('GET', path, undefined, { accept })
  }

  private async send(method: string, path: string, body: unknown, extra: Record<string, string> = {}): Promise<string> {
    const headers: Record<string, string> = { ...extra, authorization: `Bearer ${await this.accessToken()}` }
    if (body !== undefined) {
      headers['content-type'] = 'application/json'
      headers['idempotency-key'] = randomUUID()
    }
    const res = await fetch(new URL(path, this.baseUrl), { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) })
    const text = await res.text()
    if (!res.ok) throw new ApiError(res.status, (text ? safeJson(text) : null) as ApiError['problem'], `${method} ${path}`)
    return text
  }

  private async accessToken(): Promise<string> {
    if (this.token && Date.now() < this.token.expiresAt - RENEW_EARLY_MS) return this.token.value
    const res = await fetch(new URL('/oauth/token', this.baseUrl), {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${encodeURIComponent(this.clientId)}:${encodeURIComponent(this.clientSecret)}`).toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials' }).toString(),
    })
    const json = safeJson(await res.text()) as {
      access_token?: string
      expires_in?: number
      error?: string
      error_description?: string
    } | null
    if (!res.ok || !json?.access_token) {
      throw new Error(`token request to ${this.baseUrl} failed: ${res.status} ${json?.error ?? ''} ${json?.error_description ?? ''}`.trim())
    }
    this.token = { value: json.access_token, expiresAt: Date.now() + (json.expires_in ?? 900) * 1_000 }
    return this.token.value
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return { detail: text.slice(0, 200) }
  }
}
