import { createRoute, z, type RouteConfig } from '@hono/zod-openapi'
import type { Hook } from '@hono/zod-openapi'
import type { MiddlewareHandler } from 'hono'
import { validationFailed } from '../errors.js'
import type { AppEnv } from './env.js'
import { requireScope } from './middleware/authenticate.js'
import { Problem } from './common-responses.js'
import { announceDeprecation, describeDeprecation, type Deprecation } from './deprecation.js'

export { z }

/**
 * A schema built outside the HTTP layer (the domain's cold_chain block, the trace) as a named OpenAPI
 * component. zod 4 copies its methods onto each schema when it is built, so a schema built before
 * @hono/zod-openapi was loaded has no `.openapi()` of its own; the prototype's works on any schema.
 */
export function component<T extends z.ZodType>(schema: T, name: string): T {
  return z.ZodType.prototype.openapi.call(schema, name) as T
}

export const problem = (description: string) => ({ description, content: { 'application/problem+json': { schema: Problem } } })

export const json = <T extends z.ZodType>(schema: T, description: string) => ({ description, content: { 'application/json': { schema } } })
export const jsonBody = <T extends z.ZodType>(schema: T) => ({ body: { content: { 'application/json': { schema } }, required: true } })

/** What every operation of the document names (SDK method names come from `operationId`), and a deprecation if any. */
type Described = { operationId: string; summary: string; deprecation?: Deprecation }

/** The route's deprecation (deprecation.ts): its headers first among its middleware, `deprecated` in the document. */
function declared<R extends Described & { description?: string }>(route: R): { config: R; announce: MiddlewareHandler<AppEnv>[] } {
  const { deprecation, ...config } = route
  if (!deprecation) return { config: config as R, announce: [] }
  return {
    config: { ...config, deprecated: true, description: describeDeprecation(deprecation, config.description) } as unknown as R,
    announce: [announceDeprecation(deprecation)],
  }
}

/** A `/v1` route: bearer token with `scope`, the scope check, and its deprecation when it has one. */
export function v1Route<R extends Omit<RouteConfig, 'security' | 'middleware'> & Described>(scope: string, route: R) {
  const { config, announce } = declared(route)
  return createRoute({
    ...config,
    security: [{ bearer: [scope] }],
    middleware: [...announce, requireScope(scope)] as const,
    // Loosely typed on purpose: handlers return our service types, the schema documents them. The
    // answers of the middleware (401, 403, 429, …) are added to every operation by common-responses.ts.
    responses: config.responses as RouteConfig['responses'],
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
export function publicRoute<R extends RouteConfig & Described>(route: R) {
  const { config, announce } = declared(route)
  return createRoute({
    ...config,
    ...(announce.length ? { middleware: [...announce, ...[config.middleware ?? []].flat()] as MiddlewareHandler<AppEnv>[] } : {}),
    responses: config.responses as RouteConfig['responses'],
  })
}
