import type { Context } from 'hono'
import { AppError } from '../errors.js'
import type { AppEnv } from './env.js'
import { problemResponse } from './problem.js'

type RouteEntry = { method: string; path: string }

/**
 * The app's not-found handler: a path that exists under other methods answers 405 with `Allow`
 * (RFC 9110 §15.5.6 requires it), anything else 404. The routes are read from the app on the
 * first miss, when every group is registered.
 */
export function notFoundOrMethodNotAllowed(routes: () => readonly RouteEntry[]) {
  let patterns: { pattern: RegExp; methods: Set<string> }[] | null = null
  return function notFound(c: Context<AppEnv>): Response {
    patterns ??= compile(routes())
    const allowed = new Set<string>()
    for (const { pattern, methods } of patterns) if (pattern.test(c.req.path)) for (const m of methods) allowed.add(m)
    if (allowed.has('GET')) allowed.add('HEAD') // Hono answers HEAD with the GET handler
    // No route at all, or the route's own handler found nothing (e.g. an unknown file under /docs/assets/).
    if (allowed.size === 0 || allowed.has(c.req.method))
      return problemResponse(c, new AppError('not_found', `No route ${c.req.method} ${c.req.path}.`))
    const allow = [...allowed].sort().join(', ')
    return problemResponse(
      c,
      new AppError('method_not_allowed', `${c.req.path} does not accept ${c.req.method}; it accepts ${allow}.`, {}, { allow }),
    )
  }
}

/** Hono paths (`/v1/deliveries/:id/dispatch`, `:id{regex}`, `*`) as anchored regular expressions, grouped. */
function compile(routes: readonly RouteEntry[]) {
  const byPath = new Map<string, Set<string>>()
  for (const { method, path } of routes) {
    if (method === 'ALL' || path.includes('*')) continue // middleware, not endpoints
    const methods = byPath.get(path) ?? new Set<string>()
    methods.add(method.toUpperCase())
    byPath.set(path, methods)
  }
  return [...byPath].map(([path, methods]) => ({
    pattern: new RegExp(
      `^${path
        .split('/')
        .map((segment) => (segment.startsWith(':') ? '[^/]+' : escape(segment)))
        .join('/')}/?$`,
    ),
    methods,
  }))
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
