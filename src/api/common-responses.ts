import type { OpenAPIHono, RouteConfig } from '@hono/zod-openapi'
import { z } from '@hono/zod-openapi'

/**
 * The answers the middleware and the error handler give before (or instead of) a route's handler,
 * added to every operation of the document in one place, so a route added tomorrow has them
 * without saying so. Which middleware runs where is decided in app.ts; this table follows it:
 *
 * - everywhere: 405 from the not-found handler (the path exists under other methods), 500 for
 *   anything unexpected, 503 when the database or its disk cannot serve (`onError`);
 * - `/v1/*` but the document itself: authentication (401, 429 for too many invalid tokens), the
 *   route's scope (403), the rate limit (429), the query guard (422), the body guard on writes
 *   (400, 413, 415), idempotency on POST (400, 409, 422);
 * - `/oauth/*`: the throttle per caller address (429, in OAuth's error format) and the body limit
 *   on POST (413).
 */

/** `/v1` paths answered without a token; everything else under /v1 goes through the guarded chain. */
export const PUBLIC_V1 = new Set(['/v1/openapi.json'])

export const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('Stable, snake_case error code'),
    request_id: z.string(),
    errors: z
      .array(z.object({ pointer: z.string(), message: z.string() }))
      .optional()
      .describe('With `validation_failed`: the first 100 bad fields'),
    errors_omitted: z
      .number()
      .int()
      .optional()
      .describe('With `validation_failed`: how many more bad fields there are than `errors` lists'),
    allowed_actions: z.array(z.string()).optional().describe('With `invalid_transition`: the actions the delivery allows now'),
  })
  .openapi('Problem')

/** RFC 6749 §5.2 error response: the OAuth endpoints answer in OAuth's format, not problem+json. */
export const OAuthErrorBody = z.object({ error: z.string(), error_description: z.string() }).openapi('OAuthError')

type Response = Exclude<RouteConfig['responses'][string], { $ref: string }>
type Headers = Record<string, { description: string; schema: { type: 'string' } }>

const header = (description: string) => ({ description, schema: { type: 'string' as const } })
const retryAfter: Headers = { 'Retry-After': header('Seconds to wait before trying again (RFC 9110 §10.2.3)') }

const problemOf = (description: string, headers?: Headers): Response => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/problem+json': { schema: Problem } },
})

const everywhere: Record<number, Response> = {
  // RFC 9110 §15.5.6: a 405 lists the methods the path accepts.
  405: problemOf('`method_not_allowed`: the path exists, but not with this method', {
    Allow: header('The methods this path accepts'),
  }),
  500: problemOf('`internal`: something went wrong on our side; quote `request_id` (no detail is shown)'),
  503: problemOf(
    '`not_ready`: the database is unavailable, does not answer within its deadline, or its disk is full; nothing was changed',
    retryAfter,
  ),
}

const guarded: Record<number, Response> = {
  401: problemOf('`unauthorized`: missing or invalid access token', {
    'WWW-Authenticate': header('`Bearer realm="rxtrace"`, with `error="invalid_token"` for a bad token (RFC 6750 §3)'),
  }),
  403: problemOf('`insufficient_scope`: the token lacks the scope this operation needs'),
  404: problemOf('`not_found`: not found, or not visible to this token'),
  422: problemOf(
    '`validation_failed`: a parameter or member is invalid; `errors` lists the first 100 as JSON pointers, `errors_omitted` counts the rest',
  ),
  429: problemOf('`rate_limited`: too many requests for this client or tenant, or too many invalid tokens from this address', retryAfter),
}

const guardedWrite: Record<number, Response> = {
  400: problemOf('`invalid_json`: the body is not valid JSON, or `idempotency_key_missing` where a key is required'),
  409: problemOf(
    '`idempotency_in_progress`: a request with this Idempotency-Key is still running, or the change conflicts with the current state',
  ),
  413: problemOf('`payload_too_large`: the body is larger than the limit (256 KiB)'),
  415: problemOf('`unsupported_media_type`: the body is not of a media type this operation accepts'),
}

const oauth: Record<number, Response> = {
  429: {
    description: 'Too many requests from this address (or, at the token endpoint, for this client)',
    headers: retryAfter,
    content: { 'application/json': { schema: OAuthErrorBody } },
  },
}

/** What a deprecated operation answers besides its own headers (deprecation.ts). */
const deprecated: Headers = {
  Deprecation: header('When the operation was deprecated: `@` and Unix seconds (RFC 9745)'),
  Sunset: header('The HTTP-date after which it may stop answering (RFC 8594)'),
  Link: header('`rel="successor-version"`: what replaces it; `rel="deprecation"` and `rel="sunset"`: the notice'),
}

/** The common answers of one operation, by where its path is mounted and its method. */
function commonResponses(method: string, path: string): Record<number, Response> {
  const write = method !== 'get'
  if (path.startsWith('/v1/') && !PUBLIC_V1.has(path)) {
    const writes = write ? pick(guardedWrite, method === 'delete' ? [400, 409, 413] : [400, 409, 413, 415]) : {}
    return { ...guarded, ...writes, ...everywhere }
  }
  if (path.startsWith('/oauth/')) return { ...oauth, ...(method === 'post' ? pick(guardedWrite, [413]) : {}), ...everywhere }
  return { ...everywhere }
}

const pick = (from: Record<number, Response>, statuses: number[]) => Object.fromEntries(statuses.map((s) => [s, from[s]!]))

/**
 * Adds the common answers to every route registered so far. A status the route documents itself
 * keeps its description; a media type it does not list is added beside its own (a sign-in page
 * answers 429 in HTML, the throttle before it in JSON).
 */
export function addCommonResponses(registry: OpenAPIHono['openAPIRegistry']): void {
  registry.register('Problem', Problem)
  for (const definition of registry.definitions) {
    if (definition.type !== 'route') continue
    const route = definition.route
    const responses = (route.responses ??= {}) as Record<string, Response>
    if (route.deprecated)
      for (const [status, own] of Object.entries(responses)) responses[status] = { ...own, headers: { ...deprecated, ...own.headers } }
    for (const [status, common] of Object.entries(commonResponses(route.method, route.path))) {
      const own = responses[status]
      if (!own) responses[status] = common
      else if (own.content && common.content)
        responses[status] = { ...own, headers: own.headers ?? common.headers, content: { ...common.content, ...own.content } }
    }
  }
}
