import type { ImageSource, QueuedItem, QueuedUpload, Sender, SendOutcome } from './offline-queue.js'

type Answer = { data?: unknown; error?: unknown; response: { ok: boolean; status: number } }

/** The part of `createRxtraceClient(…)` this needs (typed loosely so this file compiles without the DOM types the SDK uses). */
export interface PostingClient {
  api: { POST(path: never, init: never): Promise<{ error?: unknown; response: { ok: boolean; status: number } }> }
}

/** What is sent as an upload's body. React Native's fetch sends a Blob read from a `file://` URI as it is. */
type ImageBody = Blob | Uint8Array

export interface ApiSenderOptions {
  /** Reads an image the queue kept by URI; by default `fetch(uri)` and its Blob. */
  readImage?: (uri: string) => Promise<ImageBody>
}

const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

/** Base64 to bytes without `atob` (React Native before 0.74 has none). Whitespace and padding are skipped. */
const fromBase64 = (base64: string): Uint8Array => {
  const clean = base64.replace(/[^A-Za-z0-9+/]/g, '')
  const bytes = new Uint8Array(Math.floor((clean.length * 3) / 4))
  let bits = 0
  let value = 0
  let n = 0
  for (const char of clean) {
    value = (value << 6) | alphabet.indexOf(char)
    bits += 6
    if (bits >= 8) {
      bits -= 8
      bytes[n++] = (value >> bits) & 0xff
    }
  }
  return bytes.subarray(0, n)
}

const readByFetch = async (uri: string): Promise<ImageBody> => {
  const response = await fetch(uri)
  // A local file read through fetch may answer status 0 on some platforms: only an HTTP status says it failed.
  if (/^https?:/i.test(uri) && !response.ok) throw new Error(`could not read ${uri}: ${response.status}`)
  return response.blob()
}

/**
 * Sends queued actions through the SDK: `POST /v1/deliveries/{id}/{action}` with the action's
 * `occurred_at` and its id as the Idempotency-Key; an upload is `POST
 * /v1/deliveries/{id}/attachments` with the image as the body and its Content-Type.
 */
export function apiSender(rx: PostingClient, options: ApiSenderOptions = {}): Sender {
  const post = rx.api.POST as unknown as (path: string, init: unknown) => Promise<Answer>
  const readImage = options.readImage ?? readByFetch
  const upload = async (queued: QueuedUpload): Promise<Answer> => {
    const image: ImageSource = queued.image
    const body = 'uri' in image ? await readImage(image.uri) : fromBase64(image.base64)
    return post('/v1/deliveries/{id}/attachments', {
      params: { path: { id: queued.delivery_id } },
      headers: { 'content-type': image.content_type },
      body,
      bodySerializer: (b: ImageBody) => b,
    })
  }
  return async (queued: QueuedItem): Promise<SendOutcome> => {
    const { data, error, response } =
      queued.action === 'upload'
        ? await upload(queued)
        : await post(`/v1/deliveries/{id}/${queued.action}`, {
            params: { path: { id: queued.delivery_id }, header: { 'idempotency-key': queued.id } },
            headers: { 'idempotency-key': queued.id },
            body: { ...queued.body, occurred_at: queued.occurred_at },
          })
    if (response.ok) {
      if (queued.action !== 'upload') return { kind: 'done' }
      const { id, sha256 } = data as { id: string; sha256: string }
      return { kind: 'done', attachment: { id, sha256 } }
    }
    // 401: the token source renews it; 408/429/5xx and a key still in progress (409 idempotency_in_progress): later.
    const code = (error as { code?: string } | undefined)?.code
    if (
      response.status === 401 ||
      response.status === 408 ||
      response.status === 429 ||
      response.status >= 500 ||
      code === 'idempotency_in_progress'
    ) {
      return { kind: 'retry', reason: `${response.status} ${code ?? ''}`.trim() }
    }
    return { kind: 'rejected', status: response.status, problem: error }
  }
}
