/**
 * What one connection or one tote may take from the broker. Every limit has a default here and an
 * environment variable in src/config.ts; docs/security.md ("MQTT limits") lists them.
 */
export type BrokerLimits = {
  /**
   * Largest remaining length (everything after the fixed header) of any packet, CONNECT included.
   * A larger declaration closes the connection as soon as it is read. 256 KiB: a batch of 500
   * readings is about 100 KiB.
   */
  maxPacketBytes: number
  /**
   * A connection that has not completed its CONNECT by then is closed, however it trickles bytes.
   * A tote on a cellular link finishes its CONNECT within a few seconds; aedes' default is 30 s.
   */
  connectTimeoutMs: number
  /**
   * Client ids one tote may hold a session under at once: connected now, or persistent
   * (clean session 0) and kept for a later connection.
   */
  maxSessionsPerTote: number
  /**
   * QoS 1 messages kept for one persistent session, sent or waiting (a session that is offline,
   * or reads nothing, does not acknowledge). Beyond it, new messages to that session are dropped.
   */
  maxQueuedPerSession: number
}

export const DEFAULT_LIMITS: BrokerLimits = {
  maxPacketBytes: 256 * 1024,
  connectTimeoutMs: 10_000,
  maxSessionsPerTote: 4,
  maxQueuedPerSession: 100,
}
