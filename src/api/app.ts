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
import { AppError } from '../errors.js'
import type { Metrics } from '../metrics.js'
import type { Db } from '../store/schema.js'
import type { AppEnv } from './env.js'
import { accessLog } from './middleware/access-log.js'
import { auditTrail } from './middleware/audit.js'
import { authenticate } from './middleware/authenticate.js'
import { bodyGuard, bodySizeLimit } from './middleware/body-guard.js'
import { idempotency } from './middleware/idempotency.js'
import { rateLimit } from './middleware/rate-limit.js'
import { requestId } from './middleware/request-id.js'
import { validationHook } from './openapi.js'
import { onError, problemResponse } from './problem.js'
import { docsRoutes } from './routes/docs.js'
import { healthRoutes } from './routes/health.js'
import { oauthRoutes } from './routes/oauth.js'
import { authorizeRoutes } from './routes/authorize.js'
import { accountRoutes } from './routes/account.js'

export type AppDeps = {
  config: Config; db: Db; clock: Clock; logger: Logger; metrics: Metrics
  keys: KeyRing; tokens: TokenService; clients: ClientRegistry; audit: AuditLog; people: People
  readiness: Record<string, () => Promise<void>>
  /** Route groups under /v1, each built over its service. */
  v1: OpenAPIHono<AppEnv>[]
}

const PUBLIC_V1 = new Set(['/v1/openapi.json'])

/** The HTTP application: middleware in the order a request meets it, then the route groups. */
export function createApp(deps: AppDeps): OpenAPIHono<AppEnv> {
  const app = new OpenAPIHono<AppEnv>({ defaultHook: validationHook })
  app.onError(onError)
  app.notFound((c) => problemResponse(c, new AppError('not_found', `No route ${c.req.method} ${c.req.path}.`)))

  app.use('*', requestId({ logger: deps.logger }), accessLog({ metrics: deps.metrics, logger: deps.logger }))
  app.use('/oauth/*', bodySizeLimit()) // SPEC §2's limit holds for the OAuth forms too
  const guarded = [
    authenticate({ tokens: deps.tokens, users: deps.people.users }),
    // SPEC §6: every authenticated request is audited, the throttled ones included.
    auditTrail({ audit: deps.audit }),
    rateLimit({ rps: deps.config.RATE_LIMIT_RPS, burst: deps.config.RATE_LIMIT_BURST, clock: deps.clock }),
    ...bodyGuard(),
    idempotency({
      db: deps.db, clock: deps.clock, requiredOn: (path) => path === '/v1/prescriptions',
      // Its service writes the key with the prescription, in one transaction.
      recordedInTransaction: (path) => path === '/v1/prescriptions',
    }),
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

  app.route('/', healthRoutes({ metrics: deps.metrics, checks: deps.readiness }))
  app.route('/', docsRoutes() as unknown as Hono<AppEnv>)
  app.route('/', oauthRoutes({ clients: deps.clients, tokens: deps.tokens, keys: deps.keys, people: deps.people, clock: deps.clock }))
  app.route('/', authorizeRoutes({ clients: deps.clients, people: deps.people, issuer: deps.tokens.issuer }))
  app.route('/', accountRoutes({ people: deps.people }))
  for (const group of deps.v1) app.route('/', group)

  app.openAPIRegistry.registerComponent('securitySchemes', 'bearer', { type: 'http', scheme: 'bearer', bearerFormat: 'JWT (RFC 9068, ES256)' })
  app.doc31('/v1/openapi.json', {
    openapi: '3.1.0',
    info: { title: 'rxtrace API', version: '1.0.0', description: 'Prescription delivery with a verifiable chain of custody and live cold-chain monitoring.' },
    servers: [{ url: deps.tokens.issuer }],
  })
  return app
}
