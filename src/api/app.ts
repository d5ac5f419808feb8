import { OpenAPIHono } from '@hono/zod-openapi'
import type { Hono } from 'hono'
import type { Logger } from 'pino'
import type { AuditLog } from '../auth/audit-log.js'
import type { ClientRegistry } from '../auth/clients.js'
import type { KeyRing } from '../auth/keys.js'
import type { People } from '../auth/people.js'
import type { TokenService } from '../auth/tokens.js'
import type { Clock } from '../clock.js'
import type { Config } from '../config.js'
import type { Metrics } from '../metrics.js'
import type { Db } from '../store/schema.js'
import type { AppEnv } from './env.js'
import { accessLog } from './middleware/access-log.js'
import { auditTrail } from './middleware/audit.js'
import { authenticate } from './middleware/authenticate.js'
import { bodyGuard, bodySizeLimit } from './middleware/body-guard.js'
import { crashAfterHandler } from './middleware/crash-after-handler.js'
import { idempotency } from './middleware/idempotency.js'
import { noStore } from './middleware/no-store.js'
import { formNulGuard, nulGuard } from './middleware/nul-guard.js'
import { queryGuard } from './middleware/query-guard.js'
import { oauthThrottle } from './middleware/oauth-throttle.js'
import { rateLimit } from './middleware/rate-limit.js'
import { requestId } from './middleware/request-id.js'
import { TokenBuckets } from './middleware/token-buckets.js'
import type { BucketStore } from './middleware/bucket-store.js'
import { PUBLIC_V1 } from './common-responses.js'
import { buildDocument, registerWebhooks } from './document.js'
import { validationHook } from './openapi.js'
import { notFoundOrMethodNotAllowed } from './method-not-allowed.js'
import { onError } from './problem.js'
import { docsRoutes } from './routes/docs.js'
import { healthRoutes } from './routes/health.js'
import { oauthRoutes } from './routes/oauth.js'
import { authorizeRoutes } from './routes/authorize.js'
import { accountRoutes } from './routes/account.js'
import { statementBody } from './routes/reconciliation.js'
import { attachmentBody } from './routes/attachments.js'
import { consoleRoutes } from './routes/console.js'
import { discoveryRoutes, type MqttEndpoints } from './routes/discovery.js'

export type AppDeps = {
  config: Config
  db: Db
  clock: Clock
  logger: Logger
  metrics: Metrics
  keys: KeyRing
  tokens: TokenService
  clients: ClientRegistry
  audit: AuditLog
  people: People
  readiness: Record<string, () => Promise<void>>
  /** Where the rate limits and the OAuth throttle count: memory, or with PostgreSQL the store every copy shares. */
  buckets: BucketStore
  /** Where totes connect; null until the listeners are bound. */
  mqttEndpoints: () => MqttEndpoints | null
  /** Route groups under /v1, each built over its service. */
  v1: OpenAPIHono<AppEnv>[]
}

/** The HTTP application: middleware in the order a request meets it, then the route groups. */
export function createApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
  app.onError(onError)
  app.notFound(notFoundOrMethodNotAllowed(() => app.routes))

  app.use('*', requestId({ logger: deps.logger }), accessLog({ metrics: deps.metrics, logger: deps.logger }))
  const { config, clock } = deps
  // Secrets are answered under these paths (client, tote, webhook and writeback secrets; tokens),
  // and everything else under them is a tenant's data: nothing here may be kept by a cache.
  app.use('/v1/*', noStore())
  app.use('/oauth/*', noStore({ pragma: true })) // RFC 6749 §5.1
  app.use('*', nulGuard())
  app.use('/oauth/*', bodySizeLimit()) // the 256 KiB body limit holds for the OAuth forms too
  app.use('/oauth/*', formNulGuard())
  // docs/security.md, Resource limits: what anyone may call without a token is throttled per caller address.
  app.use(
    '/oauth/*',
    oauthThrottle({
      perAddress: { rps: config.OAUTH_ADDRESS_RPS, burst: config.OAUTH_ADDRESS_BURST },
      perClient: { rps: config.OAUTH_CLIENT_RPS, burst: config.OAUTH_CLIENT_BURST },
      buckets: deps.buckets,
      trustProxy: config.TRUST_PROXY,
    }),
  )
  const guarded = [
    authenticate({
      tokens: deps.tokens,
      users: deps.people.users,
      invalidTokens: new TokenBuckets(config.INVALID_TOKEN_RPS, config.INVALID_TOKEN_BURST, clock),
      trustProxy: config.TRUST_PROXY,
    }),
    // docs/api.md, Audit log: every authenticated request is audited, the throttled ones included.
    auditTrail({ audit: deps.audit, actionOf: (method, route) => actionsOf(app).get(`${method} ${route}`) ?? null }),
    rateLimit({
      rps: config.RATE_LIMIT_RPS,
      burst: config.RATE_LIMIT_BURST,
      tenantRps: config.RATE_LIMIT_TENANT_RPS,
      tenantBurst: config.RATE_LIMIT_TENANT_BURST,
      buckets: deps.buckets,
    }),
    queryGuard(),
    // An operator's statement (JSON lines or CSV, up to 4 MiB) and a proof-of-delivery image (up to
    // 5 MiB, read by its route) are the bodies that are not JSON requests.
    ...bodyGuard([statementBody, attachmentBody]),
    idempotency({
      // Each write's service keeps the answer in the transaction of its change.
      db: deps.db,
      clock: deps.clock,
      requiredOn: (path) => path === '/v1/prescriptions',
    }),
    ...(deps.config.CRASH_AFTER_HANDLER ? [crashAfterHandler({ paths: new RegExp(deps.config.CRASH_AFTER_HANDLER) })] : []),
  ]
  app.use('/v1/*', async (c, next) => {
    if (PUBLIC_V1.has(c.req.path)) return next()
    // Run the /v1 chain in order; each step calls the next.
    const run = async (i: number): Promise<void> => {
      if (i === guarded.length) return next()
      const result = await guarded[i]!(c, () => run(i + 1))
      if (result instanceof Response) c.res = result
    }
    await run(0)
  })

  app.route('/', healthRoutes({ metrics: deps.metrics, checks: deps.readiness, deadlineMs: deps.config.READY_TIMEOUT_MS }))
  app.route('/', docsRoutes() as unknown as Hono<AppEnv>)
  app.route('/', oauthRoutes({ clients: deps.clients, tokens: deps.tokens, keys: deps.keys, people: deps.people, clock: deps.clock }))
  app.route(
    '/',
    authorizeRoutes({
      clients: deps.clients,
      people: deps.people,
      issuer: deps.tokens.issuer,
      trustProxy: config.TRUST_PROXY,
      clock: deps.clock,
    }),
  )
  app.route('/', accountRoutes({ people: deps.people }))
  app.route('/', consoleRoutes() as unknown as Hono<AppEnv>)
  app.route('/', discoveryRoutes({ issuer: deps.tokens.issuer, mqtt: deps.mqttEndpoints }))
  for (const group of deps.v1) app.route('/', group)

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT (RFC 9068, ES256)',
  })
  registerWebhooks(app)
  // Built once, on first request: the routes are all registered by then and never change.
  let document: ReturnType<typeof buildDocument> | undefined
  app.get('/v1/openapi.json', (c) => c.json((document ??= buildDocument(app, deps.tokens.issuer))))
  return app
}

const actionMaps = new WeakMap<OpenAPIHono<AppEnv>, Map<string, string>>()

/**
 * `METHOD /hono/:path` → operationId of every declared route: the `action` of an audit record.
 * Built on first use, once every route is registered.
 */
function actionsOf(app: OpenAPIHono<AppEnv>): Map<string, string> {
  let actions = actionMaps.get(app)
  if (!actions) {
    actions = new Map()
    for (const definition of app.openAPIRegistry.definitions) {
      if (definition.type !== 'route' || !definition.route.operationId) continue
      const { method, path, operationId } = definition.route
      actions.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`, operationId)
    }
    actionMaps.set(app, actions)
  }
  return actions
}
