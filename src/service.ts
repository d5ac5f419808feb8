import { createAdaptorServer } from '@hono/node-server'
import type { Server as HttpServer } from 'node:http'
import type { Logger } from 'pino'
import { AuditLog } from './auth/audit-log.js'
import { ClientRegistry, ensureConsoleClient } from './auth/clients.js'
import { KeyRing } from './auth/keys.js'
import { TrackingTokens } from './auth/tracking-tokens.js'
import { PatientNotices } from './services/patient-notices.js'
import { createPeople } from './auth/people.js'
import { DEFAULT_SCRYPT } from './auth/passwords.js'
import { TokenService } from './auth/tokens.js'
import { systemClock, type Clock } from './clock.js'
import { consoleRedirectUris, ingestGatherMs, issuerOf, type Config } from './config.js'
import { drainOnClose, listen } from './listen.js'
import { createLogger } from './logger.js'
import { createMetrics } from './metrics.js'
import type { ServiceDeps } from './services/context.js'
import { Outbox } from './events/outbox.js'
import { EventFeed } from './events/event-cursor.js'
import { EventStreams } from './events/event-stream.js'
import { postgresLimitsOf, type EntityStoreOptions } from './store/database.js'
import { openDataDir } from './store/data-dir.js'
import { sealClearSecrets } from './store/sealed-secrets.js'
import { loadSecretsKeys } from './store/secrets-key.js'
import { ToteBindings } from './telemetry/bindings.js'
import { ColdChainMonitor, createColdChainStore } from './telemetry/cold-chain-monitor.js'
import { GroupCommitter } from './telemetry/group-commit.js'
import { BindingFollower } from './telemetry/binding-follow.js'
import { IngestPipeline } from './telemetry/pipeline.js'
import { EvaluationLeases } from './telemetry/evaluation-leases.js'
import { IngestSessionLeases } from './mqtt/session-leases.js'
import { sharedStoreWiring } from './telemetry/shared-store.js'
import type { ReadingSink } from './timeseries/index.js'
import { BrokerAccounts } from './mqtt/broker-accounts.js'
import { brokerAddress } from './mqtt/broker-url.js'
import { PasswordSeal } from './mqtt/seal.js'
import { createDispatcher } from './webhooks/dispatcher.js'
import { parseRetrySchedule } from './webhooks/retry-policy.js'
import { SqlDeliveryQueue } from './webhooks/sql-queue.js'
import { WebhookKeyRing } from './webhooks/signing-keys.js'
import { fhirWriteback } from './services/fhir-writeback.js'
import { createHttpApp } from './wiring/http-app.js'
import type { MqttEndpoints } from './api/routes/discovery.js'
import { startIngestBroker, type IngestBroker } from './wiring/ingest-broker.js'
import { openEntityStoreOf, openReadingSinkOf, sharedPostgresOf } from './wiring/stores.js'
import { createServices } from './wiring/services.js'
import { atMost, Periodic } from './wiring/timers.js'
import { escalateDueAlarms } from './alarms/escalation.js'
import { driverAuthenticator } from './auth/driver-mqtt.js'
import { positionsIngest } from './telemetry/positions-ingest.js'
import { Expirer } from './timeseries/expirer.js'

export type ServiceOverrides = { clock?: Clock; logger?: Logger; store?: EntityStoreOptions; sink?: ReadingSink }

// Revocations made by other instances reach this one within this long.
const REVOCATION_REFRESH_MS = 30_000
// Wall-clock duties of the rule engine (reorder window by silence, sensor gaps, summaries).
const MONITOR_TICK_MS = 1_000
// How often unacknowledged alarms are checked against their escalation time: a second late at most, one indexed query.
const ALARM_ESCALATION_CHECK_MS = 1_000
// Deliveries dispatched elsewhere (or before a restart) are picked up within this long.
const OPEN_DELIVERIES_REFRESH_MS = 5_000
// On stop, requests already running get this long to finish before their connections are cut:
// half of the 10 s stop deadline, leaving the rest for telemetry, webhooks and the stores.
const HTTP_DRAIN_MS = 5_000
// Releasing evaluation leases and closing the LISTEN connection at stop: each gets this long.
const SHARED_STOP_MS = 1_000

/**
 * Builds the whole service in-process from a configuration: stores, OAuth server, application
 * services and the HTTP app. Nothing listens until `start()`; tests use `app.request()` directly.
 */
export async function buildService(config: Config, overrides: ServiceOverrides = {}) {
  const clock = overrides.clock ?? systemClock
  const logger = overrides.logger ?? createLogger(config.LOG_LEVEL)
  const metrics = createMetrics()
  // The data directory and its files are the service user's only (0700 and 0600).
  for (const { path, was, narrowed } of openDataDir(config.DATA_DIR)) {
    logger.warn(
      { path, was },
      narrowed ? 'narrowed a data path to the service user only' : 'a data path others may read is not ours to narrow',
    )
  }
  // The key-encryption key goes first: a wrong one stops the start before anything is served.
  const { box: secrets, origin, generated } = loadSecretsKeys(config)
  if (generated)
    logger.warn(
      { path: generated },
      'generated a key-encryption key for the stored secrets (SECRETS_KEY unset); keep a copy apart from the database backups',
    )
  const storeOptions = { limits: postgresLimitsOf(config), onConnectionError: (err: unknown, what: string) => logger.warn({ err }, what) }
  const store = await openEntityStoreOf(config, overrides.store, { ...storeOptions, sqliteCacheMiB: config.SQLITE_CACHE_MIB })
  const { db, dialect } = store
  const { sealed } = await sealClearSecrets(db, secrets, origin).catch(async (error: unknown) => {
    await store.close()
    throw error
  })
  if (sealed > 0) logger.info({ sealed }, 'sealed secrets the store held in clear under the key-encryption key')

  const keys = new KeyRing(db, secrets, clock, config.TOKEN_TTL_S)
  await keys.load()
  const webhookKeys = new WebhookKeyRing(db, secrets, clock)
  await webhookKeys.load()
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
  // docs/api.md, Patient notifications: a delivery's moves raise `patient.notify` with a signed tracking link.
  const trackingTokens = new TrackingTokens(keys, issuerOf(config), clock)
  const patientNotices = new PatientNotices(trackingTokens, () => clock.now())
  const outbox = new Outbox(clock, patientNotices.alongside)
  const people = createPeople({ db, dialect, clock, tokens, audit, scrypt: { ...DEFAULT_SCRYPT, log2N: config.PASSWORD_SCRYPT_LOG2_N } })

  const deps: ServiceDeps = { db, dialect, clock, outbox, logger, metrics, secrets }

  // On PostgreSQL, N copies of the service may share the store (docs/deployment.md, Several
  // copies on one PostgreSQL): one evaluates each delivery at a time (leases), the others forward
  // it the readings they store, and bindings made by one are announced to the others.
  const postgres = sharedPostgresOf(config, overrides.store)
  const leases = dialect === 'postgres' ? new EvaluationLeases(db) : undefined
  const shared =
    postgres && leases
      ? await sharedStoreWiring({ db, ...postgres, holder: leases.holder, logger, isRemote: (id): boolean => monitor.isRemote(id) })
      : null
  const sink = await openReadingSinkOf(config, { override: overrides.sink, postgres, shared, storeOptions })
  const bindings = new ToteBindings(db, clock)
  const monitor: ColdChainMonitor = new ColdChainMonitor({
    store: createColdChainStore({ db, sink, outbox, clock }),
    clock,
    metrics,
    logger,
    windowMs: config.REORDER_WINDOW_S * 1_000,
    leases,
    storingTotes: () => committer.storingTotes(),
  })
  const committer = new GroupCommitter(sink, ingestGatherMs(config))
  const pipeline = new IngestPipeline({ bindings, committer, monitor, clock, metrics, logger })
  const follower = new BindingFollower({ db, bindings, committer, monitor, sink, logger })
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
  const services = createServices({
    deps,
    trackingTokens,
    patientNotices,
    config,
    streams,
    tokens,
    accounts,
    sink,
    stabilityPlanChanged: (delivery, plan) => {
      if (delivery.tote_id) bindings.invalidate(delivery.tote_id)
      void monitor.planChanged(delivery.id, plan)
    },
    toteBindingChanged: (toteId, deliveryId) => {
      bindings.invalidate(toteId)
      shared?.announceBinding(toteId, deliveryId)
      void follower.follow(toteId, deliveryId)
    },
  })
  const expirer = new Expirer({
    db,
    dialect,
    sink,
    clock,
    logger,
    policy: {
      recordsDays: config.RETENTION_RECORDS_DAYS,
      unboundDays: config.RETENTION_UNBOUND_DAYS,
      attemptsDays: config.RETENTION_ATTEMPTS_DAYS,
      batch: config.RETENTION_BATCH,
      pauseMs: config.RETENTION_PAUSE_MS,
    },
    followPendingBindings: () => follower.followPending(),
    pendingBindingsBoundBefore: (ms) => follower.pendingBoundBefore(ms),
    metrics: {
      removed: (table, n) => metrics.expiredRows.inc({ table }, n),
      deferred: () => metrics.expiryDeferred.inc(),
      passDone: (atMs, seconds) => metrics.expiryPassDone(atMs, seconds),
      followsPending: (n) => metrics.followsPending.set(n),
    },
    // Positions of deliveries ended more than POSITION_RETENTION_DAYS ago (docs/fleet.md).
    trims: [
      { name: 'driver_positions', trim: (limit) => services.positions.purgeEnded(config.POSITION_RETENTION_DAYS * 86_400_000, limit) },
    ],
  })
  let mqttEndpoints: MqttEndpoints | null = null
  const app = createHttpApp({
    ...{ config, store, db, dialect, sink, clock, logger, metrics, keys, tokens, clients, audit, people, services, webhookKeys },
    mqttEndpoints: () => mqttEndpoints,
  })

  const dispatcher = createDispatcher({
    queue: new SqlDeliveryQueue(
      db,
      outbox,
      secrets,
      (endpointId, err) =>
        logger.error({ err, endpoint_id: endpointId }, 'cannot open a webhook secret or render its body; left to its lease'),
      fhirWriteback(db, tokens.issuer),
    ),
    webhookKeys,
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
  let ingest: IngestBroker | null = null
  const periodic = new Periodic(logger)

  return {
    config,
    clock,
    logger,
    metrics,
    store,
    db,
    /** Seals and opens the store's secrets under the key-encryption key (SECRETS_KEY). */
    secrets,
    keys,
    /** The Ed25519 keys that sign `v1a` webhooks (GET /.well-known/webhook-keys.json). */
    webhookKeys,
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
    /** Background expiry (docs/operations.md, Retention); `pass()` runs one now. */
    expirer,
    /** The embedded broker; null before start() and with MQTT_URL. */
    get broker() {
      return ingest?.embedded ?? null
    },
    /** The link to the external broker (MQTT_URL); null otherwise. */
    get externalBroker() {
      return ingest?.external ?? null
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
      await follower.reattributeOpenDeliveries() // before any tote can connect and load a delivery without them
      await shared?.listen({
        readings: (rows) => monitor.acceptForwarded(rows),
        binding: (toteId, deliveryId) => {
          bindings.invalidate(toteId)
          void follower.follow(toteId, deliveryId, true)
        },
        missed: () => monitor.recomputeAll(),
      })
      ingest = await startIngestBroker({
        config,
        address: broker,
        accounts,
        // Copies on one PostgreSQL adopt the MQTT sessions of a copy that died (docs/deployment.md).
        sessions: broker && dialect === 'postgres' ? new IngestSessionLeases(db) : null,
        authenticateTote: (username, password) => services.totes.authenticate(username, password),
        onReadings: (toteId, payload) => pipeline.handle(toteId, payload),
        authenticateDriver: driverAuthenticator({ tokens, users: people.users, clock }),
        onLocation: positionsIngest({ positions: services.positions, clock }),
        logger,
        metrics,
      })
      const mqttPorts = { mqttPort: ingest.mqttPort, mqttWsPort: ingest.mqttWsPort }
      mqttEndpoints = ingest.embedded
        ? { tcpPort: ingest.mqttPort, wsPort: ingest.mqttWsPort, publicUrl: null }
        : { tcpPort: null, wsPort: null, publicUrl: config.MQTT_PUBLIC_URL ?? null }
      const server = createAdaptorServer({ fetch: app.fetch }) as HttpServer
      http = drainOnClose(server)
      const httpPort = await listen(server, config.PORT, config.HOST, 'PORT').catch(async (error) => {
        await ingest?.close()
        throw error
      })
      dispatcher.start()
      periodic.every(REVOCATION_REFRESH_MS, () => tokens.refreshRevocations(), 'revocation refresh')
      // Readings, idempotency keys, attempts, sessions past their retention (docs/operations.md, Retention).
      if (config.RETENTION_INTERVAL_S > 0) expirer.start(config.RETENTION_INTERVAL_S * 1_000)
      periodic.every(MONITOR_TICK_MS, () => monitor.tick(), 'cold-chain tick')
      periodic.every(ALARM_ESCALATION_CHECK_MS, async () => void (await escalateDueAlarms({ db, outbox, clock })), 'alarm escalation')
      periodic.every(OPEN_DELIVERIES_REFRESH_MS, () => follower.watchOpenDeliveries(), 'watching open deliveries')
      await follower.watchOpenDeliveries()
      if (!pinned) newAdmin = await clients.ensureAdmin()
      // After the admin: ensureAdmin creates one only while there is no client at all.
      await ensureConsoleClient(clients, db, consoleRedirectUris(config, httpPort))
      return { httpPort, ...mqttPorts }
    },
    /** Graceful stop: no new requests, in-flight ones finish, pending records are written. */
    async stop(): Promise<void> {
      periodic.stop()
      const expiryStopped = expirer.stop()
      // Stop taking work first: the broker (or the ingest worker) acknowledges what it is storing, then disconnects.
      // Live event streams end cleanly first (their readers resume elsewhere with Last-Event-ID),
      // so the HTTP drain does not wait for them.
      const streamsClosed = streams.close()
      await Promise.all([http?.stop(HTTP_DRAIN_MS), ingest?.close()])
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
      await expiryStopped
      await sink.close()
      await store.close()
    },
  }
}

export type Service = Awaited<ReturnType<typeof buildService>>
