import type { AuthenticateError, Client, ConnectPacket } from 'aedes'
import { isDriverId, isTopicSafeId } from '../topics.js'
import type { ToteSessions } from '../tote-sessions.js'
import type { HookContext } from './types.js'

/** CONNACK return codes, MQTT 3.1.1 §3.2.2.3 (aedes' AuthErrorCode is a const enum we cannot import). */
const IDENTIFIER_REJECTED = 2
const SERVER_UNAVAILABLE = 3
const BAD_USERNAME_OR_PASSWORD = 4

const refusal = (returnCode: number, message: string): AuthenticateError =>
  Object.assign(new Error(message), { returnCode }) as AuthenticateError

type RefusalReason = 'bad_credentials' | 'identifier_rejected' | 'too_many_sessions' | 'server_unavailable'

export type AuthenticateTote = (username: string, password: Buffer) => Promise<string | null>
/**
 * A driver's CONNECT (username `dr_…`) → the driver id and when its credentials expire (epoch
 * ms), or null to refuse. The connection is closed at that expiry: a driver reconnects with fresh ones.
 */
export type AuthenticateDriver = (username: string, password: Buffer) => Promise<{ driverId: string; expiresAtMs: number } | null>

/**
 * CONNECT → which tote is this? Username is the tote id (`tt_…`) and password the secret from
 * `POST /v1/totes`. The client id must be the tote id, the tote id + `-` + any suffix (a second
 * connection, e.g. a subscriber), or empty with a clean session: a connection with the same
 * client id takes over the first (MQTT 3.1.1 §3.1.4), so a free choice would let one tote
 * disconnect another. Tote ids contain no `-`, so no tote's ids overlap another's.
 */
export function createAuthenticate(
  authenticateTote: AuthenticateTote,
  toteSessions: ToteSessions,
  { sessions, logger, metrics }: HookContext,
  authenticateDriver?: AuthenticateDriver,
) {
  // A driver (username dr_…) is checked by its own function, when there is one: the same client
  // id rules and session limits apply to it. Without one, a driver's username is unknown.
  const identify = async (username: string, password: Buffer): Promise<{ id: string; expiresAtMs: number | null } | null> => {
    if (!isDriverId(username)) {
      const toteId = await authenticateTote(username, password)
      return toteId === null || isDriverId(toteId) ? null : { id: toteId, expiresAtMs: null }
    }
    const driver = authenticateDriver ? await authenticateDriver(username, password) : null
    return driver === null || driver.driverId !== username ? null : { id: driver.driverId, expiresAtMs: driver.expiresAtMs }
  }

  /** Connections that sent an empty client id; aedes replaces it with a random one before authenticate. */
  const assignedIds = new WeakSet<Client>()

  function preConnect(client: Client, packet: ConnectPacket, done: (error: Error | null, ok: boolean) => void) {
    if (packet.clientId === '') assignedIds.add(client)
    done(null, true)
  }

  function authenticate(
    client: Client,
    username: string | undefined,
    password: Buffer | undefined,
    done: (error: AuthenticateError | null, success: boolean | null) => void,
  ) {
    const refuse = (code: number, reason: RefusalReason, message: string) => {
      metrics.connectionsRefused?.inc({ reason })
      logger.info({ clientId: client.id, username, reason }, 'mqtt connect refused')
      done(refusal(code, message), false)
    }
    if (username === undefined || password === undefined) {
      return refuse(BAD_USERNAME_OR_PASSWORD, 'bad_credentials', 'username (tote id) and password are required')
    }
    identify(username, password).then(
      (identity) => {
        const toteId = identity?.id ?? null
        if (identity === null || toteId === null || !isTopicSafeId(toteId))
          return refuse(BAD_USERNAME_OR_PASSWORD, 'bad_credentials', 'bad user name or password')
        const ownId = client.id === toteId || client.id.startsWith(`${toteId}-`)
        // [MQTT-3.1.3-8] an empty client id needs a clean session
        if (assignedIds.has(client) ? !client.clean : !ownId) {
          return refuse(IDENTIFIER_REJECTED, 'identifier_rejected', `client id must be ${toteId} or start with ${toteId}-`)
        }
        if (client.closed) return done(null, false) // gone while its password was checked; aedes drops the answer
        // MQTT 3.1.1 has no reason string in a CONNACK: the code says "this client id", the log says why.
        if (!toteSessions.claim(toteId, client)) {
          metrics.limitsEnforced?.inc({ limit: 'sessions' })
          return refuse(
            IDENTIFIER_REJECTED,
            'too_many_sessions',
            `tote ${toteId} already holds the most sessions it may; reuse one of its client ids, or end one with a clean session`,
          )
        }
        sessions.set(client, toteId)
        if (identity.expiresAtMs !== null) closeAt(client, identity.expiresAtMs)
        done(null, true)
      },
      (err: unknown) => {
        logger.error({ err, username }, 'tote authentication failed')
        refuse(SERVER_UNAVAILABLE, 'server_unavailable', 'authentication unavailable')
      },
    )
  }

  /** A driver's connection lasts as long as the token it connected with. */
  function closeAt(client: Client, expiresAtMs: number) {
    const timer = setTimeout(
      () => {
        logger.info({ clientId: client.id }, 'mqtt credentials expired; closing connection')
        client.close()
      },
      Math.max(0, expiresAtMs - Date.now()),
    )
    timer.unref()
    client.conn.once('close', () => clearTimeout(timer))
  }

  return { preConnect, authenticate }
}
