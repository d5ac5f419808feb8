import type { IncomingMessage } from 'node:http'
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import { AppError } from '../errors.js'
import { isDiskFull, isStoreUnavailable } from '../store/errors.js'
import type { AppEnv } from './env.js'
import { lingerOnClose } from './lingering-close.js'

const titles: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  413: 'Content Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Content',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
}

/** RFC 9457 problem details for an AppError. */
export function problemResponse(c: Context<AppEnv>, error: AppError): Response {
  const body = {
    type: `https://rxtrace.dev/problems/${error.code.replace(/_/g, '-')}`,
    title: titles[error.status] ?? 'Error',
    status: error.status,
    detail: error.message,
    code: error.code,
    request_id: c.get('requestId'),
    ...error.extra,
  }
  const headers = new Headers(error.headers)
  headers.set('content-type', 'application/problem+json')
  if (headers.get('connection') === 'close') lingerOnClose((c.env as { incoming?: IncomingMessage } | undefined)?.incoming)
  return new Response(JSON.stringify(body), { status: error.status, headers: mergeHeaders(c, headers) })
}

// Long enough for a pool to reconnect after a restart or a dropped connection.
const RETRY_AFTER_S = 5

/** The one place errors become responses: ours keep their detail, anything else is a bare 500. */
export function onError(error: Error, c: Context<AppEnv>): Response {
  if (error instanceof AppError) return problemResponse(c, error)
  if (error instanceof HTTPException) return problemResponse(c, fromHttpException(error))
  if (isStoreUnavailable(error)) {
    // The database is away (restart, drop, partition) or its disk is full: nothing was done, and
    // the same request can succeed shortly, so 503 rather than a 500.
    c.get('log')?.().warn({ err: error }, 'storage unavailable')
    const detail = isDiskFull(error)
      ? 'Storage is full; nothing was changed. Try again later.'
      : 'The database is unavailable; try again shortly.'
    return problemResponse(c, new AppError('not_ready', detail, {}, { 'retry-after': String(RETRY_AFTER_S) }))
  }
  c.get('log')?.().error({ err: error }, 'unhandled error')
  return problemResponse(c, new AppError('internal', 'Something went wrong on our side; quote the request_id when you contact us.'))
}

// What Hono and its validators throw: 400 for unparseable JSON, 415 when the body's media type is
// not the route's, 413 from the body limit.
function fromHttpException(error: HTTPException): AppError {
  if (error.status === 400) return new AppError('invalid_json', 'The request body is not valid JSON.')
  if (error.status === 413) return new AppError('payload_too_large', 'The request body is larger than 256 KiB.')
  if (error.status === 415) return new AppError('unsupported_media_type', 'This endpoint does not accept a body of this media type.')
  if (error.status === 401) return new AppError('unauthorized', error.message)
  return new AppError(error.status >= 500 ? 'internal' : 'validation_failed', error.status >= 500 ? 'Internal error.' : error.message)
}

// Headers set earlier on the context (request id, rate limit, API version) survive an error.
function mergeHeaders(c: Context<AppEnv>, headers: Headers): Headers {
  c.res.headers.forEach((value, key) => {
    if (!headers.has(key) && key !== 'content-type' && key !== 'content-length') headers.set(key, value)
  })
  return headers
}
