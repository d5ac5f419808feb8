import { createHash, randomBytes } from 'node:crypto'
import { Readable } from 'node:stream'
import type { Service } from '../../src/service.js'

export type Page = { status: number; headers: Headers; text: string; location: URL | null; form: Record<string, string> }

/** The hidden fields of the page's form, unescaped as a browser would. */
function hiddenFields(html: string): Record<string, string> {
  const fields: Record<string, string> = {}
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    fields[m[1]!] = m[2]!
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&')
  }
  return fields
}

/**
 * A browser without JavaScript over app.request(): a cookie jar, form posts, no redirects followed.
 * `address` is the TCP peer's; `headers` go with every request (a proxy's X-Forwarded-For).
 */
export function browser(service: Service, address = '203.0.113.7', extraHeaders: Record<string, string> = {}) {
  const jar = new Map<string, string>()
  async function go(method: 'GET' | 'POST', path: string, form?: Record<string, string>): Promise<Page> {
    const headers: Record<string, string> = { ...extraHeaders }
    if (jar.size) headers.cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ')
    if (form) headers['content-type'] = 'application/x-www-form-urlencoded'
    const body = form ? new URLSearchParams(form).toString() : undefined
    // What @hono/node-server hands the app: node's request stream, whose socket has the peer's address.
    const incoming = Object.assign(Readable.from(body ? [Buffer.from(body)] : []), { socket: { remoteAddress: address } })
    const res = await service.app.request(path, { method, headers, body }, { incoming })
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(';')
      const [name, ...value] = pair!.split('=')
      if (/max-age=0/i.test(cookie) || value.join('=') === '') jar.delete(name!)
      else jar.set(name!, value.join('='))
    }
    const text = await res.text()
    const location = res.headers.get('location')
    return { status: res.status, headers: res.headers, text, location: location ? new URL(location) : null, form: hiddenFields(text) }
  }
  return { jar, get: (path: string) => go('GET', path), post: (path: string, form: Record<string, string>) => go('POST', path, form) }
}

export type Browser = ReturnType<typeof browser>

/** RFC 7636 §4.1–4.2: a verifier and its S256 challenge. */
export function pkce() {
  const verifier = randomBytes(32).toString('base64url')
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') }
}

export function authorizeUrl(params: Record<string, string>): string {
  return `/oauth/authorize?${new URLSearchParams({ response_type: 'code', code_challenge_method: 'S256', state: 'st-123', ...params })}`
}
