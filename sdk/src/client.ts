import createFetchClient, { type Client, type Middleware } from 'openapi-fetch'
import { createEmbedUrl, type EmbedSession } from './embed.js'
import {
  checkStatement,
  getRateCard,
  getReconciliation,
  getReconciliationCsv,
  type Period,
  type RateCard,
  type Reconciliation,
  type StatementComparison,
  type StatementLine,
} from './fleet-money.js'
import { subscribeExceptions, type ExceptionFeedOptions } from './exceptions.js'
import { paginate, type PagedPath, type PageItem, type PageQuery } from './pages.js'
import type { components, paths } from './schema.js'
import { ClientCredentials, staticToken, type TokenSource } from './tokens.js'

export interface RxtraceClientOptions {
  /** The service's base URL, e.g. `https://api.rxtrace.example` (no `/v1`). */
  baseUrl: string
  /** client_credentials (a server), an access token you already have, or your own token source. */
  auth: { clientId: string; clientSecret: string; scope?: string } | { accessToken: string } | TokenSource
  fetch?: typeof fetch
  /**
   * Called when an answer says its operation is deprecated (a `Deprecation` header, RFC 9745): once
   * per operation, with the `Sunset` date and the `Link` to what replaces it. Default: one
   * `console.warn` per operation; pass `() => {}` to silence it.
   */
  onDeprecated?: (notice: DeprecationNotice) => void
}

/** What a deprecated operation's answer announced. */
export type DeprecationNotice = {
  method: string
  url: string
  /** The `Deprecation` header: `@` and Unix seconds. */
  deprecation: string
  /** The `Sunset` header (an HTTP-date), when sent. */
  sunset: string | null
  /** The `Link` header (`rel="successor-version"`, `rel="deprecation"`), when sent. */
  link: string | null
}

export type Event = components['schemas']['Event']
export type RxtraceClient = ReturnType<typeof createRxtraceClient>

function tokenSource(options: RxtraceClientOptions): TokenSource {
  const { auth } = options
  if ('token' in auth) return auth
  if ('accessToken' in auth) return staticToken(auth.accessToken)
  return new ClientCredentials({ baseUrl: options.baseUrl, ...auth, ...(options.fetch ? { fetch: options.fetch } : {}) })
}

/**
 * A typed client of the rxtrace API. `api` is an openapi-fetch client over the generated `paths`:
 * `api.GET('/v1/deliveries/{id}', { params: { path: { id } } })` answers `{ data, error, response }`
 * with both typed from the OpenAPI document. Every request carries a bearer token from `auth`.
 */
export function createRxtraceClient(options: RxtraceClientOptions) {
  const tokens = tokenSource(options)
  const sent = new WeakMap<Request, string>()
  const bearer: Middleware = {
    async onRequest({ request }) {
      const token = await tokens.token()
      sent.set(request, token)
      request.headers.set('authorization', `Bearer ${token}`)
      return request
    },
    onResponse({ request, response }) {
      // RFC 6750 §3.1: a refused token is not used again; the next request gets a fresh one.
      const token = sent.get(request)
      if (response.status === 401 && token) tokens.invalidate(token)
      return undefined
    },
  }
  const api: Client<paths> = createFetchClient<paths>({ baseUrl: options.baseUrl, ...(options.fetch ? { fetch: options.fetch } : {}) })
  api.use(bearer, deprecationWatch(options.onDeprecated))

  return {
    api,
    tokens,
    /** Every item of a list, page after page (`next_cursor`), as an async iterator. */
    list<P extends PagedPath>(path: P, query?: PageQuery<P>): AsyncGenerator<PageItem<P>> {
      return paginate(api, path, query)
    },
    /** A fleet's exceptions as they happen; reconnects and resumes with `Last-Event-ID` (see ExceptionFeedOptions). */
    exceptions(fleetId: string, feed: ExceptionFeedOptions = {}): AsyncGenerator<Event> {
      return subscribeExceptions({ baseUrl: options.baseUrl, tokens, fetch: options.fetch, fleetId, ...feed })
    },
    /** A signed URL of the fleet's branded dashboard for an iframe (ttl ≤ 600 s). */
    embedUrl(fleetId: string, ttlS?: number): Promise<EmbedSession> {
      return createEmbedUrl(api, fleetId, ttlS)
    },
    /** The fleet's rate card in force now. */
    rateCard(fleetId: string): Promise<RateCard> {
      return getRateCard(api, fleetId)
    },
    /** A period's reconciliation: one line per ended delivery and the totals. */
    reconciliation(fleetId: string, period: Period): Promise<Reconciliation> {
      return getReconciliation(api, fleetId, period)
    },
    /** The period's lines as CSV text (header row first). */
    reconciliationCsv(fleetId: string, period: Period): Promise<string> {
      return getReconciliationCsv(api, fleetId, period)
    },
    /** The operator's statement (lines, sent as JSON lines, or CSV text) compared with the period's lines. */
    checkStatement(fleetId: string, period: Period, statement: Iterable<StatementLine> | string): Promise<StatementComparison> {
      return checkStatement(api, fleetId, period, statement)
    },
  }
}

/** Reports each deprecated operation once (by method and path template). */
function deprecationWatch(
  report: (notice: DeprecationNotice) => void = (n) =>
    console.warn(`rxtrace: ${n.method} ${n.url} is deprecated${n.sunset ? `; sunset ${n.sunset}` : ''}${n.link ? ` (${n.link})` : ''}`),
): Middleware {
  const reported = new Set<string>()
  return {
    onResponse({ request, response, schemaPath }) {
      const deprecation = response.headers.get('deprecation')
      if (deprecation === null || reported.has(`${request.method} ${schemaPath}`)) return undefined
      reported.add(`${request.method} ${schemaPath}`)
      const url = request.url.split('?')[0]!
      report({ method: request.method, url, deprecation, sunset: response.headers.get('sunset'), link: response.headers.get('link') })
      return undefined
    },
  }
}
