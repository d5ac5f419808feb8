import { createRoute, z, type RouteConfig } from '@hono/zod-openapi'
import type { Hook } from '@hono/zod-openapi'
import { validationFailed } from '../errors.js'
import type { AppEnv } from './env.js'
import { requireScope } from './middleware/authenticate.js'

export { z }

/**
 * A schema built outside the HTTP layer (the domain's cold_chain block, the trace) as a named OpenAPI
 * component. zod 4 copies its methods onto each schema when it is built, so a schema built before
 * @hono/zod-openapi was loaded has no `.openapi()` of its own; the prototype's works on any schema.
 */
export function component<T extends z.ZodType>(schema: T, name: string): T {
  return z.ZodType.prototype.openapi.call(schema, name) as T
}

const Problem = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    code: z.string().describe('Stable, snake_case error code'),
    request_id: z.string(),
    errors: z.array(z.object({ pointer: z.string(), message: z.string() })).optional(),
    allowed_actions: z.array(z.string()).optional().describe('With `invalid_transition`: the actions the delivery allows now'),
  })
  .openapi('Problem')

export const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: Problem } } })

/** The failures every authenticated route can answer with (docs/api.md, Errors). */
const commonErrors = {
  400: problem('Malformed JSON or a missing Idempotency-Key'),
  401: problem('Missing or invalid access token'),
  403: problem('The token lacks the required scope'),
  404: problem('Not found, or not visible to this token'),
  413: problem('Body larger than 256 KiB'),
  415: problem('Body is not application/json'),
  422: problem('Validation failed; `errors` lists JSON pointers'),
  429: problem('Rate limited; see Retry-After'),
}

export const json = <T extends z.ZodType>(schema: T, description: string) => ({ description, content: { 'application/json': { schema } } })
export const jsonBody = <T extends z.ZodType>(schema: T) => ({ body: { content: { 'application/json': { schema } }, required: true } })

/** What every operation of the document names (SDK method names come from `operationId`). */
type Described = { operationId: string; summary: string }

/** A `/v1` route: bearer token with `scope`, the common error answers, and the scope check. */
export function v1Route<R extends Omit<RouteConfig, 'security' | 'middleware'> & Described>(scope: string, config: R) {
  return createRoute({
    ...config,
    security: [{ bearer: [scope] }],
    middleware: [requireScope(scope)] as const,
    // Loosely typed on purpose: handlers return our service types, the schema documents them.
    responses: {
      ...commonErrors,
      // Every write accepts Idempotency-Key (docs/api.md, Idempotency): a second request while the first runs is 409.
      ...(config.method === 'get'
        ? {}
        : { 409: problem('`idempotency_in_progress`: a request with this Idempotency-Key is still running') }),
      ...config.responses,
    } as RouteConfig['responses'],
  })
}

export const pageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50).describe('Page size, 1–100'),
  cursor: z.string().max(200).optional().describe('`next_cursor` of the previous page'),
})

export const pageOf = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item), next_cursor: z.string().nullable() })

export const idParam = (prefix: string) =>
  z.object({
    id: z
      .string()
      .min(3)
      .max(64)
      .openapi({ param: { name: 'id', in: 'path' }, example: `${prefix}_01jd0000000000000000000000` }),
  })

/** Validation failures become 422 problem+json with a JSON pointer per issue. */
export const validationHook: Hook<any, AppEnv, any, any> = (result) => {
  if (result.success) return
  const target = (result as { target?: string }).target
  const prefix = target === 'json' ? '' : `/${target === 'param' ? 'path' : (target ?? 'request')}`
  // RFC 6901: `~` and `/` inside a member name are escaped.
  const pointer = (path: readonly PropertyKey[]) =>
    `${prefix}/${path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`.replace(/\/$/, '') || '/'
  throw validationFailed(
    result.error.issues.flatMap((issue) =>
      // zod reports unknown members once, on their object; the caller needs to know which member to remove.
      issue.code === 'unrecognized_keys'
        ? issue.keys.map((key) => ({ pointer: pointer([...issue.path, key]), message: 'is not a known field' }))
        : [{ pointer: pointer(issue.path), message: issue.message }],
    ),
  )
}

/** A route without a token (OAuth endpoints, discovery); responses loosely typed as in v1Route. */
export function publicRoute<R extends RouteConfig & Described>(config: R) {
  return createRoute({ ...config, responses: config.responses as RouteConfig['responses'] })
}
