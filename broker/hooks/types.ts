import type { Client } from 'aedes'
import type { Logger } from 'pino'

/** The tote each authenticated connection speaks for, set by `authenticate`. */
export type Sessions = WeakMap<Client, string>

/** Counters the broker reports; a prom-client Counter fits each. All optional. */
export type BrokerMetrics = {
  /** CONNECTs refused, by CONNACK reason. */
  connectionsRefused?: {
    inc(labels: { reason: 'bad_credentials' | 'identifier_rejected' | 'too_many_sessions' | 'server_unavailable' }): void
  }
  /** Publishes and subscriptions the ACL refused. */
  aclDenied?: { inc(labels: { action: 'publish' | 'subscribe' }): void }
  /**
   * Readings publishes handed to onReadings, by outcome: stored, refused payload, store unavailable.
   * Counted through `labels()`: its child is looked up once, not per reading.
   */
  readingsPublishes?: { labels(labels: { outcome: 'accepted' | 'rejected' | 'unavailable' }): { inc(): void } }
  /** Times a limit was enforced: a packet over the size limit, a session beyond the tote's limit, a message dropped from a full queue. */
  limitsEnforced?: { inc(labels: { limit: 'packet_size' | 'sessions' | 'queue' }): void }
}

export type HookContext = {
  sessions: Sessions
  logger: Logger
  metrics: BrokerMetrics
}
