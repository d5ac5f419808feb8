/**
 * Webhook signature verification (Standard Webhooks), with WebCrypto only: it runs in Node ≥ 20,
 * browsers, Deno, Bun and edge workers alike.
 */

export interface VerifyWebhookOptions {
  /** Refuse a `webhook-timestamp` further than this from now, either way (default 300 s, the spec's). */
  toleranceS?: number
  /** Milliseconds since the epoch; a test moves it. */
  now?: () => number
}

export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'WebhookVerificationError'
  }
}

type HeaderBag = Headers | Record<string, string | string[] | undefined>

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined
  const bag = headers as Record<string, string | string[] | undefined>
  const key = Object.keys(bag).find((k) => k.toLowerCase() === name)
  const value = key === undefined ? undefined : bag[key]
  return Array.isArray(value) ? value[0] : value
}

const fromBase64 = (s: string): Uint8Array<ArrayBuffer> => Uint8Array.from(atob(s), (c) => c.charCodeAt(0))

/** One key of the service's `GET /.well-known/webhook-keys.json` (OKP, Ed25519). */
export interface WebhookPublicKey {
  /** `OKP`; keys of other types are skipped. */
  kty: string
  /** `Ed25519`; other curves are skipped. */
  crv?: string
  x?: string
  kid?: string
  [member: string]: unknown
}

/** The key set at `/.well-known/webhook-keys.json`: what verifies `v1a` (Ed25519) signatures. */
export interface WebhookKeySet {
  keys: readonly WebhookPublicKey[]
}

const isKeySet = (secret: unknown): secret is WebhookKeySet =>
  typeof secret === 'object' && secret !== null && Array.isArray((secret as WebhookKeySet).keys)

/**
 * Checks a webhook request and answers its event. `body` must be the raw bytes as received (a
 * re-serialised copy does not verify). Standard Webhooks signs `${id}.${timestamp}.${body}`; the
 * header lists signatures and one match is enough.
 * - `v1` endpoints: pass the endpoint's `whsec_…` secret (two during a rotation). The signature is
 *   base64(HMAC-SHA256(key, signed)), the key being the base64 after `whsec_`.
 * - `v1a` endpoints: pass the key set fetched from `/.well-known/webhook-keys.json` (cache it and
 *   fetch it again when no signature verifies). Each `v1a,` signature is Ed25519 over the same
 *   content, and no shared secret is involved.
 * Comparisons are WebCrypto's `verify`, which does not leak timing.
 */
export async function verifyWebhook<T = unknown>(
  body: string | Uint8Array,
  headers: HeaderBag,
  secret: string | readonly string[] | WebhookKeySet,
  options: VerifyWebhookOptions = {},
): Promise<T> {
  const id = header(headers, 'webhook-id')
  const timestamp = header(headers, 'webhook-timestamp')
  const signatures = header(headers, 'webhook-signature')
  if (!id || !timestamp || !signatures) throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature')
  const seconds = Number(timestamp)
  if (!/^\d+$/.test(timestamp) || !Number.isSafeInteger(seconds))
    throw new WebhookVerificationError('webhook-timestamp is not a number of seconds')
  const nowS = Math.floor((options.now ?? Date.now)() / 1000)
  const tolerance = options.toleranceS ?? 300
  if (seconds < nowS - tolerance) throw new WebhookVerificationError('webhook-timestamp is too old')
  if (seconds > nowS + tolerance) throw new WebhookVerificationError('webhook-timestamp is too far in the future')

  const text = typeof body === 'string' ? body : new TextDecoder().decode(body)
  const signed = new TextEncoder().encode(`${id}.${timestamp}.${text}`)
  const candidates = (scheme: 'v1' | 'v1a') =>
    signatures
      .split(' ')
      .filter((s) => s.startsWith(`${scheme},`))
      .flatMap((s) => {
        try {
          return [fromBase64(s.slice(scheme.length + 1))]
        } catch {
          return []
        }
      })
  if (isKeySet(secret)) {
    const v1a = candidates('v1a')
    for (const jwk of secret.keys) {
      if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') continue
      const key = await crypto.subtle.importKey('jwk', { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, { name: 'Ed25519' }, false, ['verify'])
      for (const signature of v1a) if (await crypto.subtle.verify('Ed25519', key, signature, signed)) return JSON.parse(text) as T
    }
    throw new WebhookVerificationError('no v1a signature verifies under the key set')
  }
  const v1 = candidates('v1')
  for (const s of typeof secret === 'string' ? [secret] : secret) {
    const key = await crypto.subtle.importKey(
      'raw',
      fromBase64(s.startsWith('whsec_') ? s.slice(6) : s),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['verify'],
    )
    for (const mac of v1) if (await crypto.subtle.verify('HMAC', key, mac, signed)) return JSON.parse(text) as T
  }
  throw new WebhookVerificationError('no signature matches')
}
