import type { Client } from 'aedes'
import type { Logger } from 'pino'

/** The tote each authenticated connection speaks for, set by `authenticate`. */
export type Sessions = WeakMap<Client, string>

/** Counters the broker reports; a prom-client Counter fits each. All optional. */
export type BrokerMetrics = {
  /** CONNECTs refused, by CONNACK reason. */
  connectionsRefused?: { inc(labels: { reason: 'bad_credentials' | 'identifier_rejected' | 'server_unavailable' }): void }
  /** Publishes and subscriptions the ACL refused. */
  aclDenied?: { inc(labels: { action: 'publish' | 'subscribe' }): void }
  /** Readings publishes handed to onReadings, by outcome: stored, refused payload, store unavailable. */
  readingsPublishes?: { inc(labels: { outcome: 'accepted' | 'rejected' | 'unavailable' }): void }
}

export type HookContext = {
  sessions: Sessions
  logger: Logger
  metrics: BrokerMetrics
}
