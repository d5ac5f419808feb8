import { Aedes, type Client, type PublishPacket } from 'aedes'
import type { Logger } from 'pino'
import { createAuthenticate, type AuthenticateDriver, type AuthenticateTote } from './hooks/authenticate.js'
import { createAuthorizePublish, InFlight, type OnLocation, type OnReadings } from './hooks/authorize-publish.js'
import { createAuthorizeSubscribe } from './hooks/authorize-subscribe.js'
import type { BrokerMetrics, HookContext, Sessions } from './hooks/types.js'
import { listenTcp, listenWebSocket, type Listener } from './listeners.js'
import { DEFAULT_LIMITS, type BrokerLimits } from './limits.js'
import { guardPacketSize } from './packet-size.js'
import { readPublishesDirectly } from './publish-reader.js'
import { boundSessionQueues, type QueuePersistence } from './session-queues.js'
import { ToteSessions } from './tote-sessions.js'
import { isIngestTopic, ownErrorsTopic } from './topics.js'

export { IngestUnavailableError, PayloadRefusedError } from './errors.js'

export type BrokerDeps = {
  /** Username and password of a CONNECT → the tote id, or null to refuse. */
  authenticateTote: AuthenticateTote
  /**
   * A tote's readings payload. Resolve once committed (the PUBACK follows). Reject with a
   * `PayloadRefusedError` for a bad payload (its reason goes to the errors topic; still
   * acknowledged); any other rejection means not stored (no PUBACK, connection closed).
   */
  onReadings: OnReadings
  /** A driver's CONNECT (username `dr_…`); without it drivers cannot connect. */
  authenticateDriver?: AuthenticateDriver
  /** A driver's positions payload, acknowledged as `onReadings` is. */
  onLocation?: OnLocation
  logger: Logger
  metrics?: BrokerMetrics
  /** `MQTT_PORT`; 0 picks a free port. */
  tcpPort: number
  /** `MQTT_WS_PORT`; null disables MQTT over WebSocket. */
  wsPort: number | null
  host?: string
  /** How long close() waits for publishes being stored before dropping connections. */
  drainTimeoutMs?: number
  /** Resource limits per connection and per tote; each omitted one takes its default. */
  limits?: Partial<BrokerLimits>
}

export type RxBroker = {
  /** The ports actually bound (differ from the requested ones when those were 0). */
  tcpPort: number
  wsPort: number | null
  /** Publishes `reason` as JSON on `rxtrace/v1/totes/{toteId}/errors` (a driver's: `rxtrace/v1/drivers/{id}/errors`). */
  publishError(toteId: string, reason: object): void
  /** Stops accepting, lets publishes being stored finish (and be acknowledged), then disconnects everyone. */
  close(): Promise<void>
}

/** The embedded MQTT 3.1.1 broker (broker/README.md): authenticate → authorize → ingest → acknowledge. */
export async function createBroker(deps: BrokerDeps): Promise<RxBroker> {
  const { logger, tcpPort, wsPort, host, drainTimeoutMs = 5_000 } = deps
  const limits: BrokerLimits = { ...DEFAULT_LIMITS, ...deps.limits }
  const context: HookContext = { sessions: new WeakMap() as Sessions, logger, metrics: deps.metrics ?? {} }
  const inFlight = new InFlight()
  let closing = false

  const toteSessions = new ToteSessions(limits.maxSessionsPerTote)
  const { preConnect, authenticate } = createAuthenticate(deps.authenticateTote, toteSessions, context, deps.authenticateDriver)
  const aedes = await Aedes.createBroker({
    preConnect,
    authenticate,
    authorizeSubscribe: createAuthorizeSubscribe(context),
    connectTimeout: limits.connectTimeoutMs,
  })
  // aedes' default in-memory persistence, created by createBroker, bounded per session.
  boundSessionQueues((aedes as unknown as { persistence: QueuePersistence }).persistence, limits.maxQueuedPerSession, {
    filled: (clientId) =>
      logger.warn({ clientId, limit: limits.maxQueuedPerSession }, 'mqtt session queue full; later messages to it are dropped'),
    dropped: () => context.metrics.limitsEnforced?.inc({ limit: 'queue' }),
  })

  const publishError = (toteId: string, reason: object) => {
    // QoS 1: a tote subscribed with QoS 1 gets the reason even across a brief reconnect.
    aedes.publish(
      { cmd: 'publish', topic: ownErrorsTopic(toteId), payload: Buffer.from(JSON.stringify(reason)), qos: 1, retain: false, dup: false },
      (err) => {
        if (err) logger.error({ err, toteId }, 'could not publish to errors topic')
      },
    )
  }
  aedes.authorizePublish = createAuthorizePublish({
    ...context,
    onReadings: deps.onReadings,
    onLocation: deps.onLocation,
    publishError,
    isClosing: () => closing,
    inFlight,
  })

  // Readings and positions are consumed by the authorizePublish hook and no one may subscribe to them, so
  // routing them (a packet copy plus two topic-trie lookups per message) is skipped entirely.
  // (aedes.publish(packet, client, done) is what lib/handlers/publish.js calls; the typings only
  // show the public two-argument form.)
  type Done = (err?: Error) => void
  type Route = (packet: PublishPacket, client?: Client | Done | null, done?: Done) => void
  const route = aedes.publish.bind(aedes) as unknown as Route
  const skipReadings: Route = (packet, client, done) => {
    if (typeof client === 'object' && client !== null && isIngestTopic(packet.topic)) return done?.()
    route(packet, client, done)
  }
  ;(aedes as unknown as { publish: Route }).publish = skipReadings

  aedes.on('clientError', (client, err) => logger.debug({ clientId: client.id, err: err.message }, 'mqtt client error'))
  aedes.on('connectionError', (_client, err) => logger.debug({ err: err.message }, 'mqtt connection error'))

  const handle = (stream: Parameters<typeof aedes.handle>[0], request?: Parameters<typeof aedes.handle>[1]) => {
    const client = aedes.handle(stream, request)
    stream.once('close', () => toteSessions.release(client))
    readPublishesDirectly(client) // inside the size guard: it reads only what the guard let through
    guardPacketSize(client, limits.maxPacketBytes, (declared) => {
      context.metrics.limitsEnforced?.inc({ limit: 'packet_size' })
      logger.info({ clientId: client.id, declared, limit: limits.maxPacketBytes }, 'mqtt packet over the size limit; closing connection')
    })
  }
  const listeners: Listener[] = []
  try {
    listeners.push(await listenTcp(handle, tcpPort, host))
    if (wsPort !== null) listeners.push(await listenWebSocket(handle, wsPort, host, limits.maxPacketBytes))
  } catch (err) {
    await Promise.all(listeners.map((l) => l.close()))
    await new Promise<void>((resolve) => aedes.close(() => resolve()))
    throw err
  }
  logger.info({ tcpPort: listeners[0]!.port, wsPort: listeners[1]?.port ?? null }, 'mqtt broker listening')

  return {
    tcpPort: listeners[0]!.port,
    wsPort: listeners[1]?.port ?? null,
    publishError,
    async close() {
      if (closing) return
      closing = true
      const stopped = Promise.all(listeners.map((l) => l.close())) // stop accepting; resolves once all sockets are gone
      const drained = inFlight.idle()
      await Promise.race([drained, new Promise((resolve) => setTimeout(resolve, drainTimeoutMs).unref())])
      // mqtt-packet corks the socket and uncorks on the next tick; let the last PUBACKs out
      // before aedes destroys the sockets.
      await new Promise((resolve) => setImmediate(resolve))
      await new Promise<void>((resolve) => aedes.close(() => resolve()))
      await stopped
    },
  }
}
