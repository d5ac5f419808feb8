import mqtt, { type IConnackPacket, type IPublishPacket, type MqttClient, type Packet } from 'mqtt'
import type { Logger } from 'pino'
import { isRefusal, rejectionOf } from '../../broker/errors.js'
import { errorsTopic, isTopicSafeId } from '../../broker/topics.js'
import type { BrokerAddress } from './broker-url.js'
import { SESSION_RENEW_EVERY_MS, type IngestSessionLeases } from './session-leases.js'

/** MQTT 5 shared subscription (§4.8.2): the broker hands each reading to one member of the group `rxtrace`. */
const SHARED_READINGS = '$share/rxtrace/rxtrace/v1/totes/+/readings'
const READINGS = /^rxtrace\/v1\/totes\/([^/]+)\/readings$/
/** An adopted session is drained once nothing has arrived for this long and everything that did is acknowledged. */
const ADOPTION_QUIET_MS = 1_000

export type IngestWorkerOptions = {
  broker: BrokerAddress
  /** This copy's client id prefix; connection i is `${clientId}_${i}`. */
  clientId: string
  connections: number
  sessionExpiryS: number
  /** Resolves once the readings are committed; rejects with a refusal (still acknowledged) or anything else (not stored). */
  onReadings(toteId: string, payload: Buffer): Promise<void>
  logger: Logger
  metrics?: { readingsPublishes?: { inc(labels: { outcome: 'accepted' | 'rejected' | 'unavailable' }): void } }
  /** How long close() waits for readings being stored before it disconnects. */
  drainTimeoutMs?: number
  /** The sessions' leases where copies share a PostgreSQL: a dead copy's sessions are adopted. Null on SQLite (one copy). */
  sessions?: IngestSessionLeases | null
}

type Held = { messageId: number; outcome: 'pending' | 'ack' | 'fail' }
type Link = {
  client: MqttClient
  /** Messages in arrival order from `head` on (an index, not shift(): with a backlog thousands are held). */
  held: Held[]
  head: number
  /** Bumped on every new connection: acks of an older one are never sent. */
  generation: number
  /** When the last message arrived (an adopted session is drained once this is long enough ago). */
  lastMessageAt: number
}
/** The first CONNACK, or the reason there is none (refused, unreachable, closed). */
function firstConnack(client: MqttClient): Promise<IConnackPacket> {
  return new Promise((resolve, reject) => {
    const settle = (error?: Error, connack?: IConnackPacket) => {
      client.off('connect', onConnect).off('error', onError).off('close', onClose)
      if (!error) return resolve(connack!)
      client.end(true)
      reject(error)
    }
    const onConnect = (connack: IConnackPacket) => settle(undefined, connack)
    const onError = (error: Error) => settle(error)
    const onClose = () => settle(new Error('the broker closed the connection before CONNACK'))
    client.on('connect', onConnect).on('error', onError).on('close', onClose)
  })
}

/** The shared subscription at QoS 1; rejects, saying what to fix, when the broker refuses it. */
async function subscribeReadings(client: MqttClient): Promise<void> {
  try {
    await client.subscribeAsync(SHARED_READINGS, { qos: 1 })
  } catch (error) {
    throw new Error(
      `the broker refused the subscription to ${SHARED_READINGS} (${(error as Error).message}); give this user the ingest role (docs/deployment.md)`,
      { cause: error },
    )
  }
}

/** mqtt.js internals this worker reaches into (see the class comment); mqtt is pinned for them (docs/dependencies.md). */
type PacketWriter = {
  _sendPacket(packet: Packet, cb?: (err?: Error) => void, cbStorePut?: unknown, noStore?: boolean): void
  _writePacket(packet: Packet, cb?: (err?: Error) => void): void
}

/**
 * One copy's share of the readings on an external broker (docs/deployment.md): `connections`
 * persistent MQTT 5 sessions (clean start 0, a session expiry) on the shared subscription, QoS 1.
 *
 * A message is acknowledged (PUBACK to the broker) only once its readings are committed, so the
 * broker keeps every message this copy has not stored and sends it again when the session
 * resumes [MQTT-4.4.0-1]. mqtt.js answers a QoS 1 publish by itself, and its
 * `customHandleAcks` holds the connection's next packet until the answer is given (one message
 * per commit); so this worker lets mqtt.js go on reading and holds back the PUBACK mqtt.js
 * writes, sending it itself when the commit is done, in the order the messages arrived [MQTT-4.6.0-2].
 */
export class IngestWorker {
  private readonly links: Link[] = []
  /** Connections to dead copies' sessions being drained (adopt()). */
  private readonly adopted = new Set<MqttClient>()
  private tending: NodeJS.Timeout | null = null
  private closing = false
  private inFlight = 0
  private idleWaiters: (() => void)[] = []

  private constructor(private readonly options: IngestWorkerOptions) {}

  /** Connects every session and subscribes; rejects (naming the reason) when the broker refuses either. */
  static async start(options: IngestWorkerOptions): Promise<IngestWorker> {
    const worker = new IngestWorker(options)
    const own = Array.from({ length: options.connections }, (_, i) => `${options.clientId}_${i}`)
    try {
      // Before connecting: a copy adopting these sessions while this one was away sees they are taken back.
      await options.sessions?.renew(own)
      for (const clientId of own) worker.links.push(await worker.connect(clientId))
    } catch (error) {
      await worker.close()
      throw error
    }
    if (options.sessions) worker.tendSessions(options.sessions, own)
    return worker
  }

  /** Publishes a reason on a tote's errors topic (QoS 1, through the broker). */
  publishError(toteId: string, reason: object): void {
    const link = this.links.find((l) => l.client.connected) ?? this.links[0]
    link?.client.publish(errorsTopic(toteId), JSON.stringify(reason), { qos: 1 }, (err) => {
      if (err) this.options.logger.error({ err, toteId }, 'could not publish to errors topic')
    })
  }

  /**
   * A graceful stop: leaves the shared subscription first, so that the broker hands this copy's
   * share to the other copies from now on instead of queueing it in this copy's session; stores
   * and acknowledges what had already arrived; then ends the connections (the sessions stay, and
   * a restart subscribes again). A copy that dies instead keeps its subscription: its share
   * waits in its session until it comes back (docs/deployment.md, Guarantees).
   */
  close(): Promise<void> {
    this.closed ??= this.leave()
    return this.closed
  }

  private closed: Promise<void> | null = null

  private async leave(): Promise<void> {
    if (this.tending) clearInterval(this.tending)
    // Adoptions stop where they are: what is not acknowledged stays in the session, whose lease
    // runs out, and another copy adopts it.
    for (const client of this.adopted) client.end(true)
    const timeoutMs = this.options.drainTimeoutMs ?? 5_000
    const within = (work: Promise<unknown>) =>
      Promise.race([work.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())])
    await within(Promise.all(this.links.filter((l) => l.client.connected).map((l) => l.client.unsubscribeAsync(SHARED_READINGS))))
    await within(this.inFlight === 0 ? Promise.resolve() : new Promise<void>((resolve) => this.idleWaiters.push(resolve)))
    this.closing = true
    await Promise.all(this.links.map((l) => l.client.endAsync().catch(() => undefined)))
  }

  /**
   * Renews the leases of this copy's sessions, and adopts the sessions whose lease ran out: those
   * of a copy that died, whose share of the readings the broker keeps queueing in its session
   * (a shared subscription's member that is away still gets its turn) until someone takes it.
   */
  private tendSessions(sessions: IngestSessionLeases, own: readonly string[]): void {
    let busy = false
    this.tending = setInterval(() => {
      if (busy || this.closing) return
      busy = true
      void (async () => {
        await sessions.renew(own)
        for (const clientId of await sessions.claimExpired(own)) void this.adopt(sessions, clientId)
      })()
        .catch((err: unknown) => this.options.logger.warn({ err }, 'renewing or claiming ingest session leases failed'))
        .finally(() => (busy = false))
    }, SESSION_RENEW_EVERY_MS)
    this.tending.unref()
  }

  /**
   * Drains a dead copy's session through this copy's ingest path, then removes it: connects with
   * its client id and clean start 0 (the broker sends what it queued there, each message
   * acknowledged only once stored, as on our own sessions), leaves the shared subscription so
   * nothing new queues there, waits until nothing has arrived for ADOPTION_QUIET_MS and everything
   * is acknowledged, then disconnects with session expiry 0, which ends the session [MQTT-3.14.2.2.2].
   *
   * The session's own copy may come back meanwhile: it takes its lease back before it connects,
   * and its connection takes the session over from ours (the later connection wins, and we never
   * reconnect), so we remove the session only while we still hold both. It subscribes again on
   * every connection, so a subscription we removed is restored.
   */
  private async adopt(sessions: IngestSessionLeases, clientId: string): Promise<void> {
    const { logger } = this.options
    const started = Date.now()
    let link: Link & { sessionPresent: boolean }
    try {
      link = await this.connect(clientId, true)
    } catch (err) {
      logger.warn({ clientId, err }, 'could not adopt the MQTT session of a copy that is gone; trying again later')
      await sessions.release(clientId).catch(() => undefined)
      return
    }
    const { client } = link
    this.adopted.add(client)
    let closed = false
    client.once('close', () => (closed = true))
    try {
      if (link.sessionPresent) {
        await client.unsubscribeAsync(SHARED_READINGS)
        while (!closed && !(link.held.length === 0 && Date.now() - link.lastMessageAt >= ADOPTION_QUIET_MS)) {
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      }
      if (!closed && !this.closing && (await sessions.holds(clientId))) {
        await client.endAsync(false, { reasonCode: 0, properties: { sessionExpiryInterval: 0 } })
        await sessions.forget(clientId)
        logger.info({ clientId, ms: Date.now() - started }, 'drained and removed the MQTT session of a copy that is gone')
      } else {
        client.end(true)
        await sessions.release(clientId)
        logger.info({ clientId }, 'stopped adopting an MQTT session: its copy came back, or this one stops')
      }
    } catch (err) {
      client.end(true)
      logger.warn({ clientId, err }, 'adopting the MQTT session of a copy that is gone failed; trying again later')
      await sessions.release(clientId).catch(() => undefined)
    } finally {
      this.adopted.delete(client)
    }
  }

  /** One persistent session; `adopting`: a dead copy's, never reconnected (its own copy's connection must win). */
  private async connect(clientId: string, adopting = false): Promise<Link & { sessionPresent: boolean }> {
    const { broker, sessionExpiryS, logger } = this.options
    const client = mqtt.connect(broker.url, {
      protocolVersion: 5,
      clientId,
      username: broker.username,
      password: broker.password,
      clean: false, // [MQTT-3.1.2-4] clean start 0: resume the session and its unacknowledged messages
      properties: { sessionExpiryInterval: sessionExpiryS, receiveMaximum: 65_535 },
      reconnectPeriod: 0, // the first connection must succeed; reconnecting is switched on below
      connectTimeout: 10_000,
      resubscribe: false, // the session keeps the subscription
    })
    const link: Link = { client, held: [], head: 0, generation: 0, lastMessageAt: Date.now() }
    // Before the CONNACK: a resumed session's messages follow it at once, and each must reach
    // receive() with its PUBACK held, never the PUBACK mqtt.js would send by itself.
    const writer = client as unknown as PacketWriter
    const send = writer._sendPacket.bind(client)
    writer._sendPacket = (packet, cb, cbStorePut, noStore) => {
      if (packet.cmd === 'puback') return cb?.()
      send(packet, cb, cbStorePut, noStore)
    }
    client.on('message', (topic, payload, packet) => this.receive(link, topic, payload, packet))
    client.on('close', () => {
      link.generation++
      link.held = [] // their PUBACKs can no longer be sent: the broker sends those messages again
      link.head = 0
    })
    const { sessionPresent } = await firstConnack(client)
    client.on('error', (err) => logger.warn({ clientId, err: err.message }, 'ingest worker connection error'))
    if (adopting) return Object.assign(link, { sessionPresent })
    await subscribeReadings(client).catch(async (error: unknown) => {
      await client.endAsync(true)
      throw error
    })
    client.options.reconnectPeriod = 1_000
    client.on('connect', (connack) => {
      logger.info({ clientId, sessionPresent: connack.sessionPresent }, 'ingest worker reconnected to the MQTT broker')
      // Subscribe again every time: the broker may have lost the session (it expired, or the broker
      // restarted without persistence), or a copy that adopted it while we were away left the
      // subscription before we took the session back.
      subscribeReadings(client).catch((err: unknown) => logger.error({ clientId, err }, 'could not subscribe to the readings again'))
    })
    return Object.assign(link, { sessionPresent })
  }

  private receive(link: Link, topic: string, payload: Buffer, packet: IPublishPacket): void {
    if (this.closing) return // not acknowledged: the broker sends it again when the session resumes
    link.lastMessageAt = Date.now()
    const match = READINGS.exec(topic)
    const toteId = match?.[1]
    const held: Held | null = packet.qos > 0 && packet.messageId !== undefined ? { messageId: packet.messageId, outcome: 'pending' } : null
    if (held) link.held.push(held)
    if (toteId === undefined || !isTopicSafeId(toteId)) {
      this.options.logger.warn({ topic }, 'message on the readings subscription with no tote in its topic; acknowledged and dropped')
      return this.settle(link, held, 'ack', link.generation)
    }
    const generation = link.generation
    this.inFlight++
    let stored: Promise<void>
    try {
      stored = this.options.onReadings(toteId, payload)
    } catch (error) {
      stored = Promise.reject(error)
    }
    stored
      .then(
        () => {
          this.options.metrics?.readingsPublishes?.inc({ outcome: 'accepted' })
          this.settle(link, held, 'ack', generation)
        },
        (error: unknown) => {
          if (isRefusal(error)) {
            // A bad payload is acknowledged (sending it again would fail the same way); its reason goes to the tote.
            this.options.metrics?.readingsPublishes?.inc({ outcome: 'rejected' })
            this.publishError(toteId, rejectionOf(error, Date.now()))
            return this.settle(link, held, 'ack', generation)
          }
          this.options.metrics?.readingsPublishes?.inc({ outcome: 'unavailable' })
          this.options.logger.error({ err: error, toteId }, 'readings not stored; reconnecting so the broker sends them again')
          this.settle(link, held, 'fail', generation)
        },
      )
      .finally(() => {
        if (--this.inFlight === 0) for (const wake of this.idleWaiters.splice(0)) wake()
      })
  }

  /** Records an outcome, then sends the PUBACKs now due from the head of the arrival order. */
  private settle(link: Link, held: Held | null, outcome: 'ack' | 'fail', generation: number): void {
    if (held === null || generation !== link.generation) return
    held.outcome = outcome
    const client = link.client
    const queue = link.held
    while (link.head < queue.length && queue[link.head]!.outcome !== 'pending') {
      const head = queue[link.head++]!
      if (head.outcome === 'fail') {
        // Not stored: no PUBACK for it or anything after it on this connection. A new connection
        // resumes the session, and the broker sends every unacknowledged message again.
        link.held = []
        link.head = 0
        link.generation++
        client.stream.destroy()
        return
      }
      if (client.connected) (client as unknown as PacketWriter)._writePacket({ cmd: 'puback', messageId: head.messageId, reasonCode: 0 })
    }
    if (link.head === queue.length) {
      queue.length = 0
      link.head = 0
    } else if (link.head > 1_024 && link.head * 2 > queue.length) {
      queue.splice(0, link.head) // drop the acknowledged prefix now and then, in one move
      link.head = 0
    }
  }
}
