import type { IncomingMessage } from 'node:http'
import type { Context, MiddlewareHandler } from 'hono'
import { AppError, validationFailed } from '../../errors.js'
import { MAX_JSON_DEPTH, parseStrictJson } from '../../strict-json.js'
import type { AppEnv } from '../env.js'

const MAX_BODY_BYTES = 256 * 1024 // docs/api.md, Conventions: 256 KiB

const json = /^application\/([\w.-]+\+)?json$/i
const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE'])

// RFC 9112 §9.6: a refusal sent before the body was read must close the connection; the unread
// rest of the body would otherwise be taken for the next request on a kept-alive connection.
const closeAfterReply = { Connection: 'close' }

const tooLarge = (limit: number) =>
  new AppError('payload_too_large', `The request body is larger than ${limit / 1024} KiB.`, {}, closeAfterReply)
// Nobody reads this answer, but the request still ends (and is audited) with a status.
const clientGone = () => new AppError('invalid_json', 'The client closed the connection before its body arrived.', {}, closeAfterReply)
const tooSlow = (withinMs: number) =>
  new AppError(
    'body_too_slow',
    `The body had not all arrived ${withinMs / 1_000} s after it was first read; send it again.`,
    {},
    closeAfterReply,
  )

/**
 * A route that takes another body than JSON, or a larger one (an operator's statement):
 * its own limit and content types, stated in its documentation.
 */
export type OtherBody = {
  method: string
  path: RegExp
  maxBytes: number
  types: RegExp
  /** Left unread here (a declared length over `maxBytes` is still refused): the route reads it itself, counting. */
  streamed?: boolean
}

const otherBodyOf = (c: Context<AppEnv>, others: readonly OtherBody[]) =>
  others.find((o) => o.method === c.req.method && o.path.test(c.req.path))

/**
 * Refuses bodies that are too large (413), not JSON (415), or JSON that would otherwise be
 * rewritten or cost too much (400/422, see `parseJsonBody`) before any handler sees them.
 */
export function bodyGuard(others: readonly OtherBody[] = []): MiddlewareHandler<AppEnv>[] {
  return [bodySizeLimit(others), requireJson(others), parseJsonBody()]
}

/**
 * 413 for a body over 256 KiB, declared by Content-Length or found while reading it. The body
 * is read here, once, into hono's body cache, so handlers and validators take it from there.
 *
 * Behind @hono/node-server it is read straight from node's request stream: touching
 * `c.req.raw.body` would make the adapter build a full WHATWG Request (with an AbortSignal and a
 * web stream over the socket) for every request, which cost more CPU than any handler here.
 */
export function bodySizeLimit(others: readonly OtherBody[] = []): MiddlewareHandler<AppEnv> {
  return async function bodySizeLimitMiddleware(c, next) {
    if (!METHODS_WITH_BODY.has(c.req.method)) return next()
    const other = others.length ? otherBodyOf(c, others) : undefined
    const limit = other?.maxBytes ?? MAX_BODY_BYTES
    const declared = c.req.header('content-length')
    if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit)
    if (other?.streamed) {
      c.set('streamedBody', true)
      return next()
    }
    const bytes = await readBodyWithin(c, limit, () => tooLarge(limit))
    if (bytes !== null) cacheBody(c, bytes)
    await next()
  }
}

/** 415 for a body that is not JSON. Runs after `bodySizeLimit`, which read the body. */
function requireJson(others: readonly OtherBody[] = []): MiddlewareHandler<AppEnv> {
  return async function requireJsonMiddleware(c, next) {
    if (['POST', 'PUT', 'PATCH'].includes(c.req.method) && hasBody(c)) {
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim()
      if (!json.test(type) && !(others.length && otherBodyOf(c, others)?.types.test(type))) {
        throw new AppError(
          'unsupported_media_type',
          `Send the body as application/json (got ${type ? `"${type}"` : 'no content type'}).`,
          {},
          closeAfterReply,
        )
      }
    }
    await next()
  }
}

/**
 * Parses every JSON body once, here, and refuses what must not be rewritten: bytes that are not
 * UTF-8 (400 `invalid_json`; they would become U+FFFD and be hashed as such), nesting deeper than
 * MAX_JSON_DEPTH (400 `invalid_json`, before parsing), a reserved member name such as
 * `__proto__` anywhere, or a string escaping half of a surrogate pair (422 `validation_failed`
 * with its pointer). Validators and handlers get the parsed value and the strictly decoded text
 * from hono's request.
 */
function parseJsonBody(): MiddlewareHandler<AppEnv> {
  return async function parseJsonBodyMiddleware(c, next) {
    const bytes = bodies.get(c)
    if (bytes === undefined || bytes.length === 0 || !json.test((c.req.header('content-type') ?? '').split(';')[0]!.trim())) return next()
    const parsed = parseStrictJson(bytes)
    if (!parsed.ok) {
      if (parsed.problem === 'reserved_member' || parsed.problem === 'unstorable_text')
        throw validationFailed([{ pointer: parsed.pointer, message: parsed.message }])
      const detail =
        parsed.problem === 'too_deep'
          ? `The request body nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels.`
          : `The request body ${parsed.message}.`
      throw new AppError('invalid_json', detail)
    }
    const cache = c.req.bodyCache as Record<string, Promise<unknown>>
    cache.text = Promise.resolve(parsed.text)
    // hono's `json()` parses the cached text again on every call; the validator takes ours.
    const value = Promise.resolve(parsed.value)
    c.req.json = <T>() => value as Promise<T>
    await next()
  }
}

/** The node request behind @hono/node-server; absent when a Request is handed to `app.fetch` in-process. */
function nodeRequestOf(c: Context<AppEnv>): IncomingMessage | undefined {
  const env = c.env as { incoming?: IncomingMessage } | undefined
  return env?.incoming
}

/**
 * The whole body, counted as it arrives and refused (`refuse()`) as soon as it passes `limit`,
 * whatever Content-Length said; null when an in-process request has none. From node's request
 * behind @hono/node-server, else from the WHATWG body (a Request handed to `app.fetch`). With
 * `into` (at least `limit` bytes), node's request is read into it and the answer is a view of it.
 */
export async function readBodyWithin(
  c: Context<AppEnv>,
  limit: number,
  refuse: () => AppError,
  into?: Buffer,
  withinMs?: number,
): Promise<Buffer | null> {
  const incoming = nodeRequestOf(c)
  if (incoming) return readLimited(incoming, Number(c.req.header('content-length')), limit, refuse, into, withinMs)
  const reader = c.req.raw.body?.getReader()
  if (!reader) return null
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.length
    if (size > limit) {
      await reader.cancel()
      throw refuse()
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks, size)
}

function readLimited(
  incoming: IncomingMessage,
  declared: number,
  limit: number,
  refuse: () => AppError,
  into?: Buffer,
  withinMs?: number,
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // The client may have gone while earlier middleware awaited: node emits no more events then.
    if (incoming.destroyed && !incoming.readableEnded) return reject(clientGone())
    if (incoming.readableEnded) return resolve(Buffer.alloc(0))
    // A declared length (node stops a body at it) is filled in place: no list of chunks, no copy.
    // Its own memory, not a slice of node's shared pool: whoever takes `.buffer` sees only the body.
    let buffer =
      into?.subarray(0, limit) ??
      (Number.isSafeInteger(declared) && declared > 0 && declared <= limit ? Buffer.allocUnsafeSlow(declared) : null)
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > limit || (buffer && size + chunk.length > buffer.length)) {
        cleanup()
        buffer = null
        reject(refuse())
        return
      }
      if (buffer) chunk.copy(buffer, size)
      else chunks.push(chunk)
      size += chunk.length
    }
    const onEnd = () => {
      cleanup()
      if (buffer) resolve(buffer.subarray(0, size))
      else resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size))
    }
    // 'error' (ECONNRESET: aborted) or 'close' before 'end': the client went away mid-body.
    const onGone = () => {
      cleanup()
      reject(clientGone())
    }
    // A body trickled in to hold a reader's place: refused once its time is up, the rest unread.
    const deadline =
      withinMs === undefined
        ? undefined
        : setTimeout(() => {
            cleanup()
            buffer = null
            reject(tooSlow(withinMs))
          }, withinMs)
    const cleanup = () => {
      clearTimeout(deadline)
      incoming.off('data', onData)
      incoming.off('end', onEnd)
      incoming.off('error', onGone)
      incoming.off('close', onGone)
    }
    incoming.on('data', onData)
    incoming.on('end', onEnd)
    incoming.on('error', onGone)
    incoming.on('close', onGone)
  })
}

const bodies = new WeakMap<Context<AppEnv>, Buffer>()

/**
 * Hands the body to hono's cache: `c.req.text()`, `json()` and, for a urlencoded form (the OAuth
 * endpoints), `formData()` read it from there; the rarer `arrayBuffer()` hono derives on demand.
 */
function cacheBody(c: Context<AppEnv>, bytes: Buffer): void {
  bodies.set(c, bytes)
  // hono keeps promises in this cache (its type says values): `#cachedBody` returns what it finds.
  const cache = c.req.bodyCache as Record<string, Promise<unknown>>
  // As Request.text() decodes: UTF-8, without a leading byte-order mark.
  const text = bytes.toString('utf8')
  const decoded = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text
  cache.text = Promise.resolve(decoded)
  // A form (the OAuth endpoints) is parsed from the text too: hono would otherwise derive it through
  // two WHATWG Responses and a web stream per request, which cost more CPU than the token grant.
  // Parsed as Request.formData() parses application/x-www-form-urlencoded (URLSearchParams), and only
  // when a route asks: a JSON route refuses a form with 415 without parsing it.
  if (formType.test(c.req.header('content-type') ?? '')) {
    let form: Promise<FormData> | undefined
    Object.defineProperty(cache, 'formData', { enumerable: true, get: () => (form ??= Promise.resolve(formDataOf(decoded))) })
  }
}

const formType = /^application\/x-www-form-urlencoded\s*(;|$)/i

function formDataOf(text: string): FormData {
  const form = new FormData()
  for (const [name, value] of new URLSearchParams(text)) form.append(name, value)
  return form
}

/** A body is whatever the request carried, chunked or declared, unless it was empty. */
function hasBody(c: Context<AppEnv>): boolean {
  return (bodies.get(c)?.length ?? 0) > 0
}
