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

/**
 * Checks a webhook request and answers its event. `body` must be the raw bytes as received (a
 * re-serialised copy does not verify). `secret` is the endpoint's `whsec_…`; pass two during a
 * rotation. Standard Webhooks: signature = base64(HMAC-SHA256(key, `${id}.${timestamp}.${body}`)),
 * the key being the base64 after `whsec_`; the header lists `v1,<sig>` entries and one match is
 * enough. The comparison is WebCrypto's `verify`, which does not leak timing.
 */
export async function verifyWebhook<T = unknown>(
  body: string | Uint8Array,
  headers: HeaderBag,
  secret: string | readonly string[],
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
  const candidates = signatures
    .split(' ')
    .filter((s) => s.startsWith('v1,'))
    .map((s) => s.slice(3))
  for (const s of typeof secret === 'string' ? [secret] : secret) {
    const key = await crypto.subtle.importKey(
      'raw',
      fromBase64(s.startsWith('whsec_') ? s.slice(6) : s),
      { name: 'HMAC', hash: 'SHA-256' },
      false,
      ['verify'],
    )
    for (const candidate of candidates) {
      let mac: Uint8Array<ArrayBuffer>
      try {
        mac = fromBase64(candidate)
      } catch {
        continue
      }
      if (await crypto.subtle.verify('HMAC', key, mac, signed)) return JSON.parse(text) as T
    }
  }
  throw new WebhookVerificationError('no signature matches')
}
