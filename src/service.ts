import { createAdaptorServer } from '@hono/node-server'
import { createBroker, type RxBroker } from '../broker/index.js'
import { setTimeout as sleep } from 'node:timers/promises'
import type { Server as HttpServer } from 'node:http'
import type { Logger } from 'pino'
import { createApp } from './api/app.js'
import { purgeExpiredKeys } from './api/middleware/idempotency.js'
import { auditRoutes } from './api/routes/audit.js'
import { clientRoutes } from './api/routes/clients.js'
import { deliveryRoutes } from './api/routes/deliveries.js'
import { eventRoutes } from './api/routes/events.js'
import { fleetRoutes } from './api/routes/fleets.js'
import { rateCardRoutes } from './api/routes/rate-cards.js'
import { reconciliationRoutes } from './api/routes/reconciliation.js'
import { fleetDashboardRoutes } from './api/routes/fleet-dashboard.js'
import { embedRoutes } from './api/routes/embed.js'
import { EmbedTokens } from './auth/embed-tokens.js'
import { pharmacyRoutes } from './api/routes/pharmacies.js'
import { prescriptionRoutes } from './api/routes/prescriptions.js'
import { temperatureRoutes } from './api/routes/temperature.js'
import { toteRoutes } from './api/routes/totes.js'
import { userRoutes } from './api/routes/users.js'
import { webhookRoutes } from './api/routes/webhooks.js'
import { AuditLog } from './auth/audit-log.js'
import { ClientRegistry, ensureConsoleClient } from './auth/clients.js'
import { KeyRing } from './auth/keys.js'
import { createPeople } from './auth/people.js'
import { DEFAULT_SCRYPT } from './auth/passwords.js'
import { TokenService } from './auth/tokens.js'
import { systemClock, type Clock } from './clock.js'
import { issuerOf, type Config } from './config.js'
import { drainOnClose, listen } from './listen.js'
import { naming } from './startup-error.js'
import { createLogger } from './logger.js'
import { createMetrics } from './metrics.js'
import type { ServiceDeps } from './services/context.js'
import { DeliveryService } from './services/deliveries.js'
import { EventService } from './services/events.js'
import { FleetService } from './services/fleets.js'
import { RateCardService } from './services/rate-cards.js'
import { ReconciliationService } from './services/reconciliation.js'
import { FleetDashboardService } from './services/fleet-dashboard.js'
import { Outbox } from './events/outbox.js'
import { EventFeed } from './events/event-cursor.js'
import { EventStreams } from './events/event-stream.js'
import { fleetExceptionRoutes } from './api/routes/fleet-exceptions.js'
import { PharmacyService } from './services/pharmacies.js'
import { PrescriptionService } from './services/prescriptions.js'
import { ToteService } from './services/totes.js'
import { entityStoreOptions, openEntityStore, postgresLimitsOf, type EntityStoreOptions } from './store/database.js'
import { diskSpaceCheck } from './store/disk-space.js'
import { ensurePrivateDataDir } from './store/private-files.js'
import { ToteBindings } from './telemetry/bindings.js'
import { ColdChainMonitor, createColdChainStore } from './telemetry/cold-chain-monitor.js'
import { GroupCommitter } from './telemetry/group-commit.js'
import { openColdChainBindings } from './telemetry/open-deliveries.js'
import { IngestPipeline } from './telemetry/pipeline.js'
import { EvaluationLeases } from './telemetry/evaluation-leases.js'
import { sharedStoreWiring } from './telemetry/shared-store.js'
import { createReadingSink, type ReadingSink } from './timeseries/index.js'
import { BrokerAccounts } from './mqtt/broker-accounts.js'
import { brokerAddress, defaultClientId } from './mqtt/broker-url.js'
import { joinExternalBroker, type ExternalBroker } from './mqtt/external-broker.js'
import { PasswordSeal } from './mqtt/seal.js'
import { createDispatcher } from './webhooks/dispatcher.js'
import { WebhookService } from './services/webhook-endpoints.js'
import { parseRetrySchedule } from './webhooks/retry-policy.js'
import { SqlDeliveryQueue } from './webhooks/sql-queue.js'

export type ServiceOverrides = { clock?: Clock; logger?: Logger; store?: EntityStoreOptions; sink?: ReadingSink }

// Revocations made by other instances reach this one within this long.
const REVOCATION_REFRESH_MS = 30_000
// Wall-clock duties of the rule engine (reorder window by silence, sensor gaps, summaries).
const MONITOR_TICK_MS = 1_000
// Expired idempotency keys are deleted this often.
const IDEMPOTENCY_PURGE_MS = 10 * 60_000
// Deliveries dispatched elsewhere (or before a restart) are picked up within this long.
const OPEN_DELIVERIES_REFRESH_MS = 5_000
// Applying a binding change to stored readings: attempts, and the first pause between them (it grows).
const FOLLOW_BINDING_ATTEMPTS = 3
const FOLLOW_BINDING_RETRY_MS = 1_000
// On stop, requests already running get this long to finish before their connections are cut:
// half of the 10 s stop deadline, leaving the rest for telemetry, webhooks and the stores.
const HTTP_DRAIN_MS = 5_000
// Releasing evaluation leases and closing the LISTEN connection at stop: each gets this long.
const SHARED_STOP_MS = 1_000

/** Settles with `work`, or rejects after `ms` (the work goes on unawaited). */
function atMost(ms: number, work: Promise<void> | undefined): Promise<void> {
  if (work === undefined) return Promise.resolve()
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`not done within ${ms} ms`)), ms)
    timer.unref()
  })
  return Promise.race([work, late]).finally(() => clearTimeout(timer))
}

/**
 * Where the console's sign-in returns (docs/console.md): ISSUER's /console/ when the operator set
 * the public URL; otherwise this machine's names for the port actually bound.
 */
export function consoleRedirectUris(config: Pick<Config, 'ISSUER'>, httpPort: number): string[] {
  if (config.ISSUER) return [`${config.ISSUER.replace(/\/$/, '')}/console/`]
  return [`http://localhost:${httpPort}/console/`, `http://127.0.0.1:${httpPort}/console/`]
}

/**
 * Builds the whole service in-process from a configuration: stores, OAuth server, application
 * services and the HTTP app. Nothing listens until `start()`; tests use `app.request()` directly.
 */
export async function buildService(config: Config, overrides: ServiceOverrides = {}) {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config.LOG_LEVEL)
  const metrics = createMetrics()
  // The data directory and its files are the service user's only (0700 and 0600).
  for (const { path, was, narrowed } of ensurePrivateDataDir(config.DATA_DIR)) {
    logger.warn(
      { path, was },
      narrowed ? 'narrowed a data path to the service user only' : 'a data path others may read is not ours to narrow',
    )
  }
  const storeOptions = { limits: postgresLimitsOf(config), onConnectionError: (err: unknown, what: string) => logger.warn({ err }, what) }
  // A dropped connection fails only the queries on it (503 to their requests); the pool opens
  // new ones as the database comes back.
  const store = overrides.store
    ? await openEntityStore(overrides.store, storeOptions)
    : config.DATABASE_URL
      ? await naming('DATABASE_URL', config.DATABASE_URL, 'PostgreSQL', () => openEntityStore(entityStoreOptions(config), storeOptions))
      : await openEntityStore(entityStoreOptions(config), storeOptions)
  const { db, dialect } = store

  const keys = new KeyRing(db, clock, config.TOKEN_TTL_S)
  await keys.load()
  const tokens = new TokenService(db, keys, clock, issuerOf(config), config.TOKEN_TTL_S)
  await tokens.refreshRevocations()
  const clients = new ClientRegistry(db, clock)
  // A pinned admin is in place before anything answers; a generated one is created by start()
  // once every listener is bound, so its secret, shown once, is never lost to a failed start.
  const pinned =
    config.ADMIN_CLIENT_ID && config.ADMIN_CLIENT_SECRET
      ? { clientId: config.ADMIN_CLIENT_ID, secret: config.ADMIN_CLIENT_SECRET }
      : undefined
  if (pinned) await clients.ensureAdmin(pinned)
  let newAdmin: { clientId: string; secret: string } | null = null
  const audit = new AuditLog(db, dialect, clock)
  const outbox = new Outbox(clock)
  const people = createPeople({ db, clock, tokens, audit, scrypt: { ...DEFAULT_SCRYPT, log2N: config.PASSWORD_SCRYPT_LOG2_N } })

  const deps: ServiceDeps = { db, dialect, clock, outbox, logger, metrics }

  // On PostgreSQL, N copies of the service may share the store (docs/deployment.md, Several
  // copies on one PostgreSQL): one evaluates each delivery at a time (leases), the others forward
  // it the readings they store, and bindings made by one are announced to the others.
  const postgres =
    overrides.store?.kind === 'postgres'
      ? { url: overrides.store.url, schema: overrides.store.schema }
      : !overrides.store && config.DATABASE_URL
        ? { url: config.DATABASE_URL, schema: undefined }
        : null
  const leases = dialect === 'postgres' ? new EvaluationLeases(db) : undefined
  const shared =
    postgres && leases
      ? await sharedStoreWiring({ db, ...postgres, holder: leases.holder, logger, isRemote: (id): boolean => monitor.isRemote(id) })
      : null
  const openSink = () =>
    createReadingSink({
      dataDir: config.DATA_DIR,
      questdbConfig: config.QUESTDB_CONFIG,
      // DATABASE_URL without QUESTDB_CONFIG: readings in PostgreSQL, forwarded in the insert's own transaction.
      postgres: postgres ? { ...postgres, ...storeOptions, ...(shared ? { forward: shared.forward } : {}) } : undefined,
    })
  const opened =
    overrides.sink ??
    (config.QUESTDB_CONFIG ? await naming('QUESTDB_CONFIG', config.QUESTDB_CONFIG, 'QuestDB', openSink) : await openSink())
  // Any other sink beside a shared store forwards right after its own write, before the PUBACK.
  const sink: ReadingSink = shared && !(postgres && !overrides.sink && !config.QUESTDB_CONFIG) ? shared.forwardingAfter(opened) : opened
  const bindings = new ToteBindings(db, clock)
  const monitor: ColdChainMonitor = new ColdChainMonitor({
    store: createColdChainStore({ db, sink, outbox }),
    clock,
    metrics,
    logger,
    windowMs: config.REORDER_WINDOW_S * 1_000,
    leases,
  })
  const committer = new GroupCommitter(sink)
  const pipeline = new IngestPipeline({ bindings, committer, monitor, clock, metrics, logger })
  const watchOpenDeliveries = async () => monitor.watchOpenDeliveries(await openColdChainBindings(db))
  // A dispatch or an end may be recorded after readings inside its interval were stored (an
  // earlier occurred_at, e.g. from a driver app that was offline): the stored readings follow the
  // binding (docs/api.md, `occurred_at`), and a delivery given readings is judged again. The tote's new readings
  // wait meanwhile (monitor.hold), so none is judged without them. A backdated end only takes
  // later readings off the delivery's trace; what was judged and announced stands. Other
  // copies on one PostgreSQL hear of the binding at once (a NOTIFY, see shared-store.ts) and do the
  // same: their readings stored meanwhile with the old interval follow it, and the copy that
  // evaluates the delivery rebuilds its state (`recompute`: the readings may have been
  // attributed by the copy that made the binding).
  const followBinding = async (toteId: string, deliveryId: string, recompute = false) => {
    monitor.hold(toteId)
    try {
      const binding = (await bindings.forTote(toteId)).find((b) => b.deliveryId === deliveryId)
      if (binding) {
        await committer.settled() // readings bound with the old intervals are stored first
        if ((await sink.attribute(toteId, binding)) || recompute) await monitor.reattributed(deliveryId)
      }
    } finally {
      monitor.release(toteId)
      await watchOpenDeliveries()
    }
  }
  // A failure (a store that is briefly unavailable) is tried again a few times; after that the
  // next start's reattributeOpenDeliveries catches up.
  const followBindingWithRetries = async (toteId: string, deliveryId: string, recompute = false) => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await followBinding(toteId, deliveryId, recompute)
      } catch (err) {
        const final = attempt >= FOLLOW_BINDING_ATTEMPTS
        logger[final ? 'error' : 'warn'](
          { err, toteId, deliveryId, attempt },
          `applying a tote binding change failed${final ? '' : '; retrying'}`,
        )
        if (final) return
        await sleep(FOLLOW_BINDING_RETRY_MS * attempt, undefined, { ref: false }) // never keeps a stopping process up
      }
    }
  }
  // After a crash between an action's commit and its followBinding, a failed followBinding, or
  // readings another instance bound with a stale interval: open deliveries claim their stored
  // readings at start (one indexed range per delivery on SQLite; two count queries on QuestDB).
  const reattributeOpenDeliveries = async () => {
    for (const { toteId, binding } of await openColdChainBindings(db)) await sink.attribute(toteId, binding)
  }
  // MQTT_URL: an external broker authenticates totes; their accounts reach it through this outbox.
  const broker = config.MQTT_URL ? brokerAddress(config.MQTT_URL) : null
  const accounts =
    broker && config.MQTT_PROVISIONING === 'dynsec'
      ? new BrokerAccounts({ db, clock, logger, seal: new PasswordSeal(broker.password) })
      : null
  // One tail loop per process feeds every live event stream; a local commit wakes it at once.
  const streams = new EventStreams(
    new EventFeed(store),
    {
      pollMs: config.EVENT_STREAM_POLL_MS,
      heartbeatMs: config.EVENT_STREAM_HEARTBEAT_S * 1_000,
      bufferBytes: config.EVENT_STREAM_BUFFER_KB * 1024,
      maxPerTenant: config.EVENT_STREAM_MAX_PER_TENANT,
    },
    logger,
  )
  outbox.onAnyCommit(() => streams.wake())
  const services = {
    pharmacies: new PharmacyService(deps, config.WEBHOOK_ALLOW_PRIVATE),
    prescriptions: new PrescriptionService(deps),
    deliveries: new DeliveryService(deps, (toteId, deliveryId) => {
      bindings.invalidate(toteId)
      shared?.announceBinding(toteId, deliveryId)
      void followBindingWithRetries(toteId, deliveryId)
    }),
    fleets: new FleetService(deps),
    rateCards: new RateCardService(deps),
    reconciliation: new ReconciliationService(deps),
    dashboards: new FleetDashboardService(deps),
    totes: new ToteService(deps, config.TENANT_MAX_TOTES, accounts ?? undefined),
    events: new EventService(deps, streams, (jti) => tokens.isRevoked(jti)),
    webhooks: new WebhookService(deps, config.WEBHOOK_ALLOW_PRIVATE, config.TENANT_MAX_WEBHOOKS),
  }

  const embedTokens = new EmbedTokens(keys, tokens.issuer, clock)
  const app = createApp({
    config,
    db,
    clock,
    logger,
    metrics,
    keys,
    tokens,
    clients,
    audit,
    people,
    readiness: {
      entity_store: () => store.ping(),
      time_series: async () => void (await sink.count()),
      // A SQLite store (entities or readings) lives in DATA_DIR: ready means room to write there.
      // With DATABASE_URL the readings are in PostgreSQL or QuestDB, and nothing is.
      ...(config.DATABASE_URL ? {} : { disk: diskSpaceCheck(config.DATA_DIR, config.DISK_FREE_MIN_MB * 1024 * 1024) }),
    },
    v1: [
      pharmacyRoutes(services.pharmacies),
      prescriptionRoutes(services.prescriptions),
      deliveryRoutes(services.deliveries),
      fleetRoutes(services.fleets),
      toteRoutes(services.totes),
      eventRoutes(services.events),
      fleetExceptionRoutes(services.events),
      auditRoutes(db, audit),
      clientRoutes({ db, dialect, clients, keys, maxPerTenant: config.TENANT_MAX_CLIENTS }),
      webhookRoutes(services.webhooks),
      temperatureRoutes(services.deliveries, sink, clock),
      userRoutes(people.admin),
      rateCardRoutes(services.rateCards),
      reconciliationRoutes(services.reconciliation),
      fleetDashboardRoutes({ db, dashboards: services.dashboards, embedTokens, issuer: tokens.issuer }),
      // Not under /v1: the embedded page and its data, authorised by the embed token alone.
      embedRoutes({ db, dashboards: services.dashboards, embedTokens }),
    ],
  })

  const dispatcher = createDispatcher({
    queue: new SqlDeliveryQueue(db, outbox),
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    ...(config.WEBHOOK_RETRY_SCHEDULE ? { retrySchedule: parseRetrySchedule(config.WEBHOOK_RETRY_SCHEDULE) } : {}),
    clock: () => clock.now(),
    onAttempt: (record) =>
      metrics.webhookAttempts.inc({
        outcome: record.success ? 'success' : record.disable ? 'disabled' : record.nextAttemptAtMs === null ? 'gave_up' : 'retry',
      }),
    logger,
  })
  outbox.onCommitted(() => dispatcher.wake())

  let http: ReturnType<typeof drainOnClose> | null = null
  let embedded: RxBroker | null = null
  let external: ExternalBroker | null = null
  const timers: NodeJS.Timeout[] = []
  const every = (ms: number, task: () => Promise<void> | void, what: string) => {
    const timer = setInterval(
      () =>
        void Promise.resolve()
          .then(task)
          .catch((err) => logger.warn({ err }, `${what} failed`)),
      ms,
    )
    timer.unref()
    timers.push(timer)
  }

  /** MQTT_URL: no broker here; this copy joins the external one's shared subscription. */
  async function joinBroker(address: NonNullable<typeof broker>) {
    external = await joinExternalBroker({
      mqttUrl: config.MQTT_URL!,
      broker: address,
      accounts,
      clientId: config.MQTT_CLIENT_ID ?? defaultClientId(config.DATA_DIR),
      connections: config.MQTT_INGEST_CONNECTIONS,
      sessionExpiryS: config.MQTT_SESSION_EXPIRY_S,
      // The same pipeline as the embedded broker's: a refusal is acknowledged with its reason on
      // the errors topic; any other failure leaves the message unacknowledged for the broker to resend.
      onReadings: (toteId, payload) => pipeline.handle(toteId, payload),
      logger,
      metrics: { readingsPublishes: metrics.mqttReadingsPublishes },
    })
    return { mqttPort: external.port, mqttWsPort: null }
  }

  async function startEmbedded() {
    embedded = await createBroker({
      authenticateTote: (username, password) => services.totes.authenticate(username, password.toString('utf8')),
      // A refused payload rejects with ReadingsRejected (acknowledged, reason on the errors
      // topic); any other failure means not stored: the broker logs it and sends no PUBACK.
      onReadings: (toteId, payload) => pipeline.handle(toteId, payload),
      logger,
      metrics: {
        connectionsRefused: metrics.mqttConnectionsRefused,
        aclDenied: metrics.mqttAclDenied,
        readingsPublishes: metrics.mqttReadingsPublishes,
        limitsEnforced: metrics.mqttLimitsEnforced,
      },
      limits: {
        maxPacketBytes: config.MQTT_MAX_PACKET_BYTES,
        connectTimeoutMs: config.MQTT_CONNECT_TIMEOUT_S * 1_000,
        maxSessionsPerTote: config.MQTT_MAX_SESSIONS_PER_TOTE,
        maxQueuedPerSession: config.MQTT_MAX_QUEUED_PER_SESSION,
      },
      tcpPort: config.MQTT_PORT,
      wsPort: config.MQTT_WS_PORT === 'off' ? null : config.MQTT_WS_PORT,
      host: config.HOST,
    })
    return { mqttPort: embedded.tcpPort, mqttWsPort: embedded.wsPort }
  }

  return {
    config,
    clock,
    logger,
    metrics,
    store,
    db,
    keys,
    tokens,
    clients,
    audit,
    people,
    outbox,
    streams,
    services,
    app,
    dispatcher,
    sink,
    bindings,
    monitor,
    committer,
    pipeline,
    /** The embedded broker; null before start() and with MQTT_URL. */
    get broker() {
      return embedded
    },
    /** The link to the external broker (MQTT_URL); null otherwise. */
    get externalBroker() {
      return external
    },
    accounts,
    /** Credentials of an admin client created by this start (there was no client at all), to print once; null otherwise. */
    get newAdmin() {
      return newAdmin
    },
    /**
     * Binds the listeners; resolves with the ports actually bound. With MQTT_URL, `mqttPort` is
     * the external broker's (where totes connect) and nothing here listens for MQTT.
     */
    async start(): Promise<{ httpPort: number; mqttPort: number; mqttWsPort: number | null }> {
      await reattributeOpenDeliveries() // before any tote can connect and load a delivery without them
      await shared?.listen({
        readings: (rows) => monitor.acceptForwarded(rows),
        binding: (toteId, deliveryId) => {
          bindings.invalidate(toteId)
          void followBindingWithRetries(toteId, deliveryId, true)
        },
        missed: () => monitor.recomputeAll(),
      })
      const mqttPorts = broker ? await joinBroker(broker) : await startEmbedded()
      const server = createAdaptorServer({ fetch: app.fetch }) as HttpServer
      http = drainOnClose(server)
      const httpPort = await listen(server, config.PORT, config.HOST, 'PORT').catch(async (error) => {
        await Promise.all([embedded?.close(), external?.close()])
        throw error
      })
      dispatcher.start()
      every(REVOCATION_REFRESH_MS, () => tokens.refreshRevocations(), 'revocation refresh')
      every(IDEMPOTENCY_PURGE_MS, () => purgeExpiredKeys(db, clock), 'idempotency key purge')
      every(MONITOR_TICK_MS, () => monitor.tick(), 'cold-chain tick')
      every(OPEN_DELIVERIES_REFRESH_MS, watchOpenDeliveries, 'watching open deliveries')
      await watchOpenDeliveries()
      if (!pinned) newAdmin = await clients.ensureAdmin()
      // After the admin: ensureAdmin creates one only while there is no client at all.
      await ensureConsoleClient(clients, db, consoleRedirectUris(config, httpPort))
      return { httpPort, ...mqttPorts }
    },
    /** Graceful stop: no new requests, in-flight ones finish, pending records are written. */
    async stop(): Promise<void> {
      for (const timer of timers) clearInterval(timer)
      // Stop taking work first: the broker (or the ingest worker) acknowledges what it is storing, then disconnects.
      // Live event streams end cleanly first (their readers resume elsewhere with Last-Event-ID),
      // so the HTTP drain does not wait for them.
      const streamsClosed = streams.close()
      await Promise.all([http?.stop(HTTP_DRAIN_MS), embedded?.close(), external?.close()])
      await streamsClosed
      await committer.drain()
      await monitor.flush()
      // The other copies take this one's deliveries over on their next tick (or, should the
      // database not answer, once the leases run out). Bounded: a partitioned database must not
      // hold the stop past its 10 s.
      await atMost(SHARED_STOP_MS, monitor.releaseLeases()).catch((err: unknown) =>
        logger.warn({ err }, 'releasing evaluation leases failed'),
      )
      await atMost(SHARED_STOP_MS, shared?.close()).catch((err: unknown) =>
        logger.warn({ err }, 'closing the notification connection failed'),
      )
      await dispatcher.stop(3_000)
      await audit.flush()
      await sink.close()
      await store.close()
    },
  }
}

export type Service = Awaited<ReturnType<typeof buildService>>
