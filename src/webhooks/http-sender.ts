import http from 'node:http'
import https from 'node:https'
import { isIP, type LookupFunction } from 'node:net'
import { performance } from 'node:perf_hooks'
import { parseRetryAfter } from './retry-policy.js'
import { assertPublicAddress, bareHostname, createGuardedLookup, WebhookTargetRefusedError } from './ssrf.js'

const USER_AGENT = 'rxtrace-webhooks/1'

/** Success is any 2xx within 10 s. */
export const DEFAULT_TIMEOUT_MS = 10_000

/**
 * Receivers answer "ok"; we keep reading up to this much so the connection can be reused,
 * and drop the connection rather than download anything bigger. The body is never stored.
 */
const MAX_RESPONSE_BYTES = 64 * 1024

export interface SendWebhookOptions {
  url: string
  /** Signature headers and anything else; `content-type`, `user-agent`, `content-length` are ours. */
  headers: Record<string, string>
  body: string
  /** `application/json` unless told (a FHIR writeback is `application/fhir+json`). */
  contentType?: string
  timeoutMs?: number
  /** `WEBHOOK_ALLOW_PRIVATE`: skip the connect-time SSRF guard and allow plain http. */
  allowPrivate: boolean
  /** Connection pooling; pass `AgentPool.agentFor`. Default: Node's global keep-alive agents. */
  agentFactory?: (url: URL) => http.Agent
  /** DNS for the SSRF guard; override only in tests. */
  lookup?: LookupFunction
  /** Aborts the attempt (shutdown); the result is then a failure with error `aborted`. */
  signal?: AbortSignal
}

export interface SendResult {
  status: number | null
  error: string | null
  /** Request start to response headers, or to the failure. */
  durationMs: number
  /** From `Retry-After` on a 429 or 503 only (RFC 6585 §4, RFC 9110 §15.6.4). */
  retryAfterMs: number | null
  success: boolean
}

const defaultGuardedLookup = createGuardedLookup()

/** POSTs one webhook attempt. Never throws: every outcome is a `SendResult`. */
export async function sendWebhook(options: SendWebhookOptions): Promise<SendResult> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  let target: URL
  try {
    target = checkTarget(options.url, options.allowPrivate)
  } catch (err) {
    return { status: null, error: describeError(err, options.timeoutMs), durationMs: elapsed(), retryAfterMs: null, success: false }
  }
  const payload = Buffer.from(options.body)
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
  let outcome = await postOnce(target, payload, options, timeoutMs)
  // A keep-alive socket the receiver closed while idle fails with ECONNRESET before any
  // response; the request almost certainly never reached the application, so try once
  // more (Node docs, `request.reusedSocket`), within what is left of the same deadline.
  if (outcome.kind === 'stale_socket' && elapsed() < timeoutMs) outcome = await postOnce(target, payload, options, timeoutMs - elapsed())
  if (outcome.kind !== 'response') {
    return {
      status: null,
      error: describeError(outcome.error, options.timeoutMs),
      durationMs: elapsed(),
      retryAfterMs: null,
      success: false,
    }
  }
  const { status, retryAfter } = outcome
  const success = status >= 200 && status <= 299
  return {
    status,
    error: status >= 300 && status <= 399 ? 'redirect not followed' : null,
    durationMs: elapsed(),
    retryAfterMs: status === 429 || status === 503 ? parseRetryAfter(retryAfter, Date.now()) : null,
    success,
  }
}

/** The https-only and address rules for the URL itself; DNS names are checked at connect time. */
function checkTarget(url: string, allowPrivate: boolean): URL {
  const target = new URL(url)
  if (target.protocol !== 'https:' && !(allowPrivate && target.protocol === 'http:')) {
    throw new WebhookTargetRefusedError('scheme_not_allowed', 'webhook URL must use https')
  }
  // Node does not call `lookup` for IP literals, so the guard would never see them.
  const host = bareHostname(target)
  if (!allowPrivate && isIP(host)) assertPublicAddress(host)
  return target
}

type PostOutcome =
  | { kind: 'response'; status: number; retryAfter: string | undefined }
  | { kind: 'error'; error: unknown }
  | { kind: 'stale_socket'; error: unknown }

function postOnce(target: URL, payload: Buffer, options: SendWebhookOptions, timeoutMs: number): Promise<PostOutcome> {
  const { allowPrivate, agentFactory, lookup = defaultGuardedLookup, signal } = options
  return new Promise((resolve) => {
    let settled = false
    const settle = (outcome: PostOutcome) => {
      if (settled) return
      settled = true
      resolve(outcome)
    }
    const transport = target.protocol === 'https:' ? https : http
    const request = transport.request(target, {
      method: 'POST',
      agent: agentFactory?.(target),
      headers: {
        ...options.headers,
        'content-type': options.contentType ?? 'application/json',
        'user-agent': USER_AGENT,
        'content-length': String(payload.length),
      },
      ...(allowPrivate ? {} : { lookup }),
    })
    // One deadline for connect, TLS, upload, headers and draining the body.
    const deadline = setTimeout(() => request.destroy(new SendTimeoutError()), timeoutMs)
    const onAbort = () => request.destroy(new SendAbortedError())
    if (signal?.aborted) onAbort()
    signal?.addEventListener('abort', onAbort, { once: true })
    request.on('close', () => {
      clearTimeout(deadline)
      signal?.removeEventListener('abort', onAbort)
    })
    request.on('error', (error: NodeJS.ErrnoException) => {
      const stale = request.reusedSocket && error.code === 'ECONNRESET'
      settle({ kind: stale ? 'stale_socket' : 'error', error })
    })
    request.on('response', (response) => {
      // Node never follows redirects on its own: a 3xx simply arrives here as a failure.
      settle({ kind: 'response', status: response.statusCode ?? 0, retryAfter: response.headers['retry-after'] })
      drainAndDiscard(response)
    })
    request.end(payload)
  })
}

function drainAndDiscard(response: http.IncomingMessage): void {
  let seen = 0
  response.on('data', (chunk: Buffer) => {
    seen += chunk.length
    if (seen > MAX_RESPONSE_BYTES) response.destroy()
  })
  response.on('error', () => {}) // the outcome is already decided
}

class SendTimeoutError extends Error {}
class SendAbortedError extends Error {}

/** A short, subscriber-safe description for the attempt's `error` field. */
function describeError(err: unknown, timeoutMs = DEFAULT_TIMEOUT_MS): string {
  if (err instanceof SendTimeoutError) return `timeout after ${timeoutMs} ms`
  if (err instanceof SendAbortedError) return 'aborted'
  if (err instanceof WebhookTargetRefusedError) return `refused: ${err.message}`
  if (err instanceof TypeError && (err as NodeJS.ErrnoException).code === 'ERR_INVALID_URL') return 'invalid URL'
  const { code, message } = err as NodeJS.ErrnoException
  return code ? `${code}: ${message}` : String(message ?? err)
}

export interface AgentPoolOptions {
  /**
   * Idle keep-alive sockets are closed after this long. Below Node's default server
   * keep-alive (5 s) so we rarely reuse a socket the receiver is closing; Node also honours a
   * shorter `Keep-Alive: timeout=` hint from the receiver.
   */
  idleSocketMs?: number
  /** Idle sockets kept per origin; the dispatcher's per-endpoint concurrency is the real bound. */
  maxFreeSocketsPerOrigin?: number
}

export interface AgentPool {
  agentFor(url: URL): http.Agent
  destroy(): void
}

/**
 * Keep-alive agents. A Node agent already pools connections per origin (host:port), so one
 * agent per scheme gives per-origin reuse without a map of agents to evict. `maxSockets` is
 * left unlimited: concurrency is bounded by the dispatcher, and a cap here would make requests
 * wait inside the agent while their timeout runs.
 */
export function createAgentPool({ idleSocketMs = 4_000, maxFreeSocketsPerOrigin = 32 }: AgentPoolOptions = {}): AgentPool {
  const options = { keepAlive: true, scheduling: 'lifo' as const, timeout: idleSocketMs, maxFreeSockets: maxFreeSocketsPerOrigin }
  const plain = new http.Agent(options)
  const secure = new https.Agent(options)
  return {
    agentFor: (url) => (url.protocol === 'https:' ? secure : plain),
    destroy() {
      plain.destroy()
      secure.destroy()
    },
  }
}
