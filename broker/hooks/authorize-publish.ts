import type { Client, PublishPacket } from 'aedes'
import { isRefusal, rejectionOf } from '../errors.js'
import { acknowledge } from '../puback.js'
import { isDriverId, ownPublishTopic } from '../topics.js'
import type { HookContext } from './types.js'

export type OnReadings = (toteId: string, payload: Buffer, qos: 0 | 1) => Promise<void>
/** A driver's positions payload: resolves once stored, rejects as `onReadings` does. */
export type OnLocation = (driverId: string, payload: Buffer) => Promise<void>

type Deps = HookContext & {
  onReadings: OnReadings
  onLocation?: OnLocation | undefined
  publishError(toteId: string, reason: object): void
  /** Set once the broker is closing: new publishes are refused so in-flight ones can finish. */
  isClosing(): boolean
  /** Work in progress, so close() can wait for it. */
  inFlight: InFlight
}

/**
 * PUBLISH → ACL, then ingest, then (and only then) let aedes answer.
 *
 * The PUBACK of a QoS 1 publish is written when this hook calls back (by acknowledge() in
 * ../puback.ts, in place of aedes' enqueuePublish → write(PubAck)), so running `onReadings` to completion
 * first makes the PUBACK mean "committed" (broker/README.md, Acknowledgements). An error from this hook closes the
 * connection without an acknowledgement [MQTT-3.3.5-2]; a refused payload is not an error here:
 * its reason goes to the tote's errors topic and the connection stays up.
 */
// A refused payload costs about as much CPU as a stored one. Past a burst, a tote's refusals are
// acknowledged at this pace, so a misbehaving tote (which cannot send more than its in-flight
// window ahead of its acks) cannot take the event loop from the others. Well-formed publishes
// are never slowed.
const REFUSALS_PER_S = 500
const REFUSAL_BURST = 500

type Budget = { tokens: number; updatedMs: number }
type Outcome = { error: Error | null; holdAckMs: number }

export function createAuthorizePublish({ sessions, logger, metrics, onReadings, onLocation, publishError, isClosing, inFlight }: Deps) {
  const publishes = {
    accepted: metrics.readingsPublishes?.labels({ outcome: 'accepted' }),
    rejected: metrics.readingsPublishes?.labels({ outcome: 'rejected' }),
    unavailable: metrics.readingsPublishes?.labels({ outcome: 'unavailable' }),
  }
  const refusalBudgets = new WeakMap<Client, Budget>()
  /** 0 while the tote is within its refusal budget, else how long to hold this acknowledgement. */
  const holdForRefusal = (client: Client): number => {
    const now = Date.now()
    const budget = refusalBudgets.get(client) ?? { tokens: REFUSAL_BURST, updatedMs: now }
    budget.tokens = Math.min(REFUSAL_BURST, budget.tokens + ((now - budget.updatedMs) / 1_000) * REFUSALS_PER_S)
    budget.updatedMs = now
    refusalBudgets.set(client, budget)
    if (budget.tokens >= 1) {
      budget.tokens -= 1
      return 0
    }
    return 1_000 / REFUSALS_PER_S
  }

  // aedes dispatches the packets of one socket read concurrently; acks must still leave in the
  // order the publishes arrived [MQTT-4.6.0-2]. Ingest runs concurrently (so it can group
  // commit); each connection keeps its publishes in arrival order and answers aedes from the
  // head of that queue as outcomes come in. One `.then` per publish: the promise chain this
  // replaced (six promises per publish) cost ~2 µs of CPU per message, plus its garbage.
  const queues = new WeakMap<Client, AckQueue>()

  const answer = (entry: Pending, toteId: string) => {
    try {
      const { error } = entry.outcome!
      if (error === null) acknowledge(entry.client, entry.packet, entry.done)
      else entry.done(error)
    } catch (err) {
      logger.error({ err, toteId }, 'aedes publish callback threw')
    }
    inFlight.settle()
  }
  const flush = (queue: AckQueue, toteId: string) => {
    while (!queue.holding && queue.entries.length > 0 && queue.entries[0]!.outcome !== null) {
      const entry = queue.entries[0]!
      if (entry.outcome!.holdAckMs > 0) {
        queue.holding = true
        setTimeout(() => {
          queue.holding = false
          queue.entries.shift()
          answer(entry, toteId)
          flush(queue, toteId)
        }, entry.outcome!.holdAckMs)
        return
      }
      queue.entries.shift()
      answer(entry, toteId)
    }
  }

  const settle = (entry: Pending, outcome: Outcome) => {
    entry.outcome = outcome
    flush(entry.queue, entry.toteId)
  }
  const accepted = (entry: Pending) => {
    try {
      publishes.accepted?.inc()
      settle(entry, ACCEPTED)
    } catch (failure) {
      logger.error({ err: failure, toteId: entry.toteId }, 'readings publish failed in the broker')
      settle(entry, { error: new Error('internal error'), holdAckMs: 0 })
    }
  }
  const refused = (entry: Pending, err: unknown) => {
    const { toteId } = entry
    try {
      if (!isRefusal(err)) {
        publishes.unavailable?.inc()
        logger.error({ err, toteId }, 'readings not stored; closing connection so the tote re-sends')
        return settle(entry, { error: new Error('readings could not be stored'), holdAckMs: 0 })
      }
      const rejection = rejectionOf(err, Date.now())
      publishes.rejected?.inc()
      const holdAckMs = holdForRefusal(entry.client)
      // Within budget each refusal is logged; beyond it only counted, so a flood cannot flood the log.
      if (holdAckMs === 0) logger.info({ toteId, code: rejection.error, reason: rejection.reason }, 'tote payload rejected')
      publishError(toteId, rejection)
      settle(entry, { error: null, holdAckMs })
    } catch (failure) {
      logger.error({ err: failure, toteId }, 'readings publish failed in the broker')
      settle(entry, { error: new Error('internal error'), holdAckMs: 0 })
    }
  }

  return function authorizePublish(client: Client | null, packet: PublishPacket, done: (error?: Error | null) => void) {
    const toteId = client === null ? undefined : sessions.get(client)
    if (client === null || toteId === undefined) return done(new Error('publisher is not an authenticated tote'))
    let queue = queues.get(client)
    if (queue === undefined) queues.set(client, (queue = { entries: [], holding: false, topic: ownPublishTopic(toteId) }))
    if (packet.topic !== queue.topic) {
      metrics.aclDenied?.inc({ action: 'publish' })
      logger.warn({ toteId, topic: packet.topic }, 'mqtt publish refused by ACL; closing connection')
      return done(new Error(`tote ${toteId} may only publish to ${queue.topic}`))
    }
    if (isClosing()) return done(new Error('broker is shutting down'))
    packet.retain = false // a reading is not state to replay to later subscribers

    const payload = typeof packet.payload === 'string' ? Buffer.from(packet.payload) : packet.payload
    const entry: Pending = { done, outcome: null, client, packet, toteId, queue }
    queue.entries.push(entry)
    inFlight.add()
    // QoS 2 is handled as at-least-once: ingest de-duplicates on (tote_id, ts) anyway.
    let stored: Promise<void>
    try {
      // A driver's positions (docs/fleet.md) take the same path: stored, then acknowledged.
      if (isDriverId(toteId)) stored = onLocation ? onLocation(toteId, payload) : Promise.reject(new Error('positions are not taken here'))
      else stored = onReadings(toteId, payload, packet.qos === 0 ? 0 : 1)
    } catch (err) {
      return refused(entry, err)
    }
    // Anonymous arrows only: under tsx a named closure costs an Object.defineProperty (keepNames) per publish.
    stored.then(
      () => accepted(entry),
      (err: unknown) => refused(entry, err),
    )
  }
}

type Pending = {
  done: (error?: Error | null) => void
  outcome: Outcome | null
  client: Client
  packet: PublishPacket
  toteId: string
  queue: AckQueue
}
/** A connection's publishes awaiting their answer, and the one topic it may publish to (made once, not per publish). */
type AckQueue = { entries: Pending[]; holding: boolean; topic: string }
const ACCEPTED: Outcome = { error: null, holdAckMs: 0 }

/** Publishes between arrival and acknowledgement, so close() can wait for them. */
export class InFlight {
  private count = 0
  private waiters: (() => void)[] = []
  add(): void {
    this.count++
  }
  settle(): void {
    if (--this.count === 0) for (const wake of this.waiters.splice(0)) wake()
  }
  /** Resolves once nothing is in flight. */
  idle(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve))
  }
}
