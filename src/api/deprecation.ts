import type { MiddlewareHandler } from 'hono'
import type { AppEnv } from './env.js'

/**
 * A route's deprecation, declared once where the route is (`v1Route(scope, { …, deprecation })`):
 * the route then answers the headers below on every response, and the OpenAPI document marks the
 * operation `deprecated` with the same dates (docs/api.md, Deprecation).
 */
export type Deprecation = {
  /** RFC 3339: when the route was deprecated (announced). */
  since: string
  /** RFC 3339: the earliest the route may stop answering; at least 6 months after `since` (docs/api.md). */
  sunset: string
  /** What replaces it: a path of this API (`/v1/…`) or a URL. */
  successor?: string
  /** A page that explains the change (migration notes). */
  notice?: string
}

const MIN_NOTICE_MS = 182 * 86_400_000 // docs/api.md, Deprecation: six months between announcement and sunset

const epochSeconds = (rfc3339: string) => Math.floor(Date.parse(rfc3339) / 1000)

/** The headers a deprecated route answers with, computed once per route. */
export function deprecationHeaders(deprecation: Deprecation): Record<string, string> {
  const { since, sunset, successor, notice } = deprecation
  if (Number.isNaN(Date.parse(since)) || Number.isNaN(Date.parse(sunset)))
    throw new Error(`deprecation: since and sunset must be RFC 3339 dates (got ${since}, ${sunset})`)
  if (Date.parse(sunset) - Date.parse(since) < MIN_NOTICE_MS)
    throw new Error(`deprecation: the sunset (${sunset}) must be at least six months after the deprecation (${since})`)
  const links = [
    ...(successor ? [`<${successor}>; rel="successor-version"`] : []), // RFC 5829 §3
    ...(notice ? [`<${notice}>; rel="deprecation"; type="text/html"`, `<${notice}>; rel="sunset"; type="text/html"`] : []), // RFC 9745 §3, RFC 8594 §6
  ]
  return {
    Deprecation: `@${epochSeconds(since)}`, // RFC 9745 §2.1: a structured-field Date
    Sunset: new Date(Date.parse(sunset)).toUTCString(), // RFC 8594 §3: an HTTP-date (IMF-fixdate)
    ...(links.length ? { Link: links.join(', ') } : {}),
  }
}

/** Route middleware: sets the headers before anything else runs, so refusals (403, 404, 422) carry them too. */
export function announceDeprecation(deprecation: Deprecation): MiddlewareHandler<AppEnv> {
  const headers = Object.entries(deprecationHeaders(deprecation))
  return async function announceDeprecationMiddleware(c, next) {
    for (const [name, value] of headers) c.header(name, value)
    await next()
  }
}

/** The operation's description in the OpenAPI document. */
export function describeDeprecation({ since, sunset, successor, notice }: Deprecation, description?: string): string {
  return [
    description,
    `**Deprecated** since ${since.slice(0, 10)}; it may stop answering after ${sunset.slice(0, 10)}.` +
      (successor ? ` Use \`${successor}\` instead.` : '') +
      (notice ? ` See ${notice}.` : '') +
      ' Its answers carry `Deprecation`, `Sunset` and `Link` headers.',
  ]
    .filter(Boolean)
    .join('\n\n')
}
