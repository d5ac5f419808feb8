import type { OpenAPIHono } from '@hono/zod-openapi'
import { createApp, type AppDeps } from '../api/app.js'
import type { AppEnv } from '../api/env.js'
import { alarmRoutes } from '../api/routes/alarms.js'
import { auditRoutes } from '../api/routes/audit.js'
import { clientRoutes } from '../api/routes/clients.js'
import { deliveryRoutes } from '../api/routes/deliveries.js'
import { attachmentRoutes } from '../api/routes/attachments.js'
import { embedRoutes } from '../api/routes/embed.js'
import { epcisRoutes } from '../api/routes/epcis.js'
import { eventRoutes } from '../api/routes/events.js'
import { fleetDashboardRoutes } from '../api/routes/fleet-dashboard.js'
import { fleetExceptionRoutes } from '../api/routes/fleet-exceptions.js'
import { fleetRoutes } from '../api/routes/fleets.js'
import { pharmacyRoutes } from '../api/routes/pharmacies.js'
import { positionRoutes } from '../api/routes/positions.js'
import { prescriptionRoutes } from '../api/routes/prescriptions.js'
import { assessmentRoutes } from '../api/routes/assessments.js'
import { rateCardRoutes } from '../api/routes/rate-cards.js'
import { productRoutes } from '../api/routes/products.js'
import { reconciliationRoutes } from '../api/routes/reconciliation.js'
import { temperatureRoutes } from '../api/routes/temperature.js'
import { toteRoutes } from '../api/routes/totes.js'
import { userRoutes } from '../api/routes/users.js'
import { webhookRoutes } from '../api/routes/webhooks.js'
import { webhookKeyRoutes } from '../api/routes/webhook-keys.js'
import type { WebhookKeyRing } from '../webhooks/signing-keys.js'
import { EmbedTokens } from '../auth/embed-tokens.js'
import { TrackingTokens } from '../auth/tracking-tokens.js'
import { trackingRoutes } from '../api/routes/tracking.js'
import type { BucketStore } from '../api/middleware/bucket-store.js'
import { MemoryBuckets } from '../api/middleware/bucket-store.js'
import { SharedBuckets } from '../api/middleware/shared-buckets.js'
import type { EntityStore } from '../store/database.js'
import { diskSpaceCheck } from '../store/disk-space.js'
import type { Dialect } from '../store/dialect.js'
import type { ReadingSink } from '../timeseries/index.js'
import type { Services } from './services.js'
import { issuerOf } from '../config.js'
import { EpcisService } from '../services/epcis.js'

export type HttpAppWiring = Omit<AppDeps, 'readiness' | 'v1' | 'buckets'> & {
  store: EntityStore
  dialect: Dialect
  sink: ReadingSink
  services: Services
  /** The Ed25519 keys that sign `v1a` webhooks. */
  webhookKeys: WebhookKeyRing
}

/** The HTTP app with its readiness checks and every route group over its service. */
export function createHttpApp(wiring: HttpAppWiring): OpenAPIHono<AppEnv> {
  const { store, dialect, sink, services, webhookKeys: _webhookKeys, ...deps } = wiring
  const { config } = deps
  // docs/security.md, Limits across copies: with PostgreSQL every copy spends from the same buckets.
  const buckets = dialect === 'postgres' ? new SharedBuckets(deps.db, deps.clock) : new MemoryBuckets(deps.clock)
  return createApp({
    ...deps,
    buckets,
    readiness: {
      entity_store: () => store.ping(),
      // A trivial statement: counting the readings read a year of partitions on every probe.
      time_series: () => sink.ping(),
      // A SQLite store (entities or readings) lives in DATA_DIR: ready means room to write there.
      // With DATABASE_URL the readings are in PostgreSQL or QuestDB, and nothing is.
      ...(config.DATABASE_URL ? {} : { disk: diskSpaceCheck(config.DATA_DIR, config.DISK_FREE_MIN_MB * 1024 * 1024) }),
    },
    v1: v1Routes(wiring, buckets),
  })
}

function v1Routes(
  { config, db, dialect, clock, keys, tokens, clients, audit, people, sink, services, webhookKeys }: HttpAppWiring,
  buckets: BucketStore,
): OpenAPIHono<AppEnv>[] {
  const embedTokens = new EmbedTokens(keys, tokens.issuer, clock)
  const trackingTokens = new TrackingTokens(keys, tokens.issuer, clock)
  return [
    pharmacyRoutes(services.pharmacies),
    prescriptionRoutes(services.prescriptions, services.redeliveries),
    deliveryRoutes(services.deliveries, people.signatures),
    attachmentRoutes(services.attachments),
    alarmRoutes(services.alarms),
    fleetRoutes(services.fleets),
    positionRoutes(services.positions, clock),
    toteRoutes(services.totes, sink, clock),
    eventRoutes(services.events),
    fleetExceptionRoutes(services.events),
    auditRoutes(db, audit),
    clientRoutes({ db, dialect, clients, keys, maxPerTenant: config.TENANT_MAX_CLIENTS }),
    webhookRoutes(services.webhooks),
    webhookKeyRoutes(webhookKeys),
    temperatureRoutes(services.deliveries, sink, clock),
    epcisRoutes(new EpcisService({ db, sink, clock, deliveries: services.deliveries, baseUrl: issuerOf(config) })),
    userRoutes(people.admin),
    rateCardRoutes(services.rateCards),
    productRoutes(services.products, people.signatures),
    assessmentRoutes(services.assessments, people.signatures),
    reconciliationRoutes(services.reconciliation),
    fleetDashboardRoutes({ db, dashboards: services.dashboards, embedTokens, issuer: tokens.issuer }),
    // Not under /v1: the embedded page and its data, authorised by the embed token alone.
    embedRoutes({ db, dashboards: services.dashboards, embedTokens }),
    // Not under /v1 either: the patient's page, authorised by its token alone.
    trackingRoutes({
      tracking: services.tracking,
      tokens: trackingTokens,
      buckets,
      limits: {
        perAddress: { rps: config.TRACKING_ADDRESS_RPS, burst: config.TRACKING_ADDRESS_BURST },
        perLink: { rps: config.TRACKING_LINK_RPS, burst: config.TRACKING_LINK_BURST },
        trustProxy: config.TRUST_PROXY,
      },
    }),
  ]
}
