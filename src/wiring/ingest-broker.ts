import { createBroker, type RxBroker } from '../../broker/index.js'
import type { Config } from '../config.js'
import type { Logger } from 'pino'
import type { Metrics } from '../metrics.js'
import type { BrokerAccounts } from '../mqtt/broker-accounts.js'
import { defaultClientId, type BrokerAddress } from '../mqtt/broker-url.js'
import { joinExternalBroker, type ExternalBroker } from '../mqtt/external-broker.js'
import type { IngestSessionLeases } from '../mqtt/session-leases.js'

/** Where totes' readings come in: the embedded broker, or (MQTT_URL) an external one's shared subscription. */
export type IngestBroker = {
  /** The embedded broker; null with MQTT_URL. */
  embedded: RxBroker | null
  /** The link to the external broker (MQTT_URL); null otherwise. */
  external: ExternalBroker | null
  /** Where totes connect: the embedded broker's ports, or the external broker's port. */
  mqttPort: number
  mqttWsPort: number | null
  close(): Promise<void>
}

export type IngestBrokerDeps = {
  config: Config
  /** MQTT_URL parsed; null for the embedded broker. */
  address: BrokerAddress | null
  accounts: BrokerAccounts | null
  /** With MQTT_URL on PostgreSQL: the ingest sessions' leases, so a dead copy's session is adopted. */
  sessions: IngestSessionLeases | null
  /** Username and password of a CONNECT to the embedded broker → the tote id, or null to refuse. */
  authenticateTote: (username: string, password: string) => Promise<string | null>
  onReadings: (toteId: string, payload: Buffer) => Promise<void>
  /** A driver's CONNECT to the embedded broker (username dr_…, password the driver user's access token); not with MQTT_URL. */
  authenticateDriver: (username: string, password: string) => Promise<{ driverId: string; expiresAtMs: number } | null>
  /** A driver's positions payload (embedded broker only). */
  onLocation: (driverId: string, payload: Buffer) => Promise<void>
  logger: Logger
  metrics: Metrics
}

export async function startIngestBroker(deps: IngestBrokerDeps): Promise<IngestBroker> {
  if (deps.address) {
    const external = await joinBroker(deps, deps.address)
    return { embedded: null, external, mqttPort: external.port, mqttWsPort: null, close: () => external.close() }
  }
  const embedded = await startEmbedded(deps)
  return { embedded, external: null, mqttPort: embedded.tcpPort, mqttWsPort: embedded.wsPort, close: () => embedded.close() }
}

/** MQTT_URL: no broker here; this copy joins the external one's shared subscription. */
function joinBroker({ config, accounts, sessions, onReadings, logger, metrics }: IngestBrokerDeps, address: BrokerAddress) {
  return joinExternalBroker({
    mqttUrl: config.MQTT_URL!,
    broker: address,
    accounts,
    clientId: config.MQTT_CLIENT_ID ?? defaultClientId(config.DATA_DIR),
    connections: config.MQTT_INGEST_CONNECTIONS,
    sessionExpiryS: config.MQTT_SESSION_EXPIRY_S,
    sessions,
    // The same pipeline as the embedded broker's: a refusal is acknowledged with its reason on
    // the errors topic; any other failure leaves the message unacknowledged for the broker to resend.
    onReadings,
    logger,
    metrics: { readingsPublishes: metrics.mqttReadingsPublishes },
  })
}

function startEmbedded({ config, authenticateTote, authenticateDriver, onReadings, onLocation, logger, metrics }: IngestBrokerDeps) {
  return createBroker({
    authenticateTote: (username, password) => authenticateTote(username, password.toString('utf8')),
    authenticateDriver: (username, password) => authenticateDriver(username, password.toString('utf8')),
    onLocation,
    // A refused payload rejects with ReadingsRejected (acknowledged, reason on the errors
    // topic); any other failure means not stored: the broker logs it and sends no PUBACK.
    onReadings,
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
}
