import { isErrorsTopic } from './topics.js'

type Packet = { topic: string; payload: Buffer | string; messageId?: number; [key: string]: unknown }
type Subscriber = { clientId: string }
type ClientRef = { id: string }

/** The part of an aedes persistence (aedes-persistence's interface, promise form) bounded here. */
export type QueuePersistence = {
  outgoingEnqueue(sub: Subscriber, packet: Packet): Promise<void>
  outgoingEnqueueCombi(subs: Subscriber[], packet: Packet): Promise<void>
  outgoingClearMessageId(client: ClientRef, packet: { messageId?: number }): Promise<Packet | undefined>
  incomingStorePacket(client: ClientRef, packet: Packet): Promise<void>
}

export type QueueEvents = {
  /** A session's queue has just reached the limit (once per filling, so a flood does not flood the log). */
  filled(clientId: string): void
  /** A message to a session with a full queue was dropped. */
  dropped(clientId: string): void
}

/**
 * Bounds what aedes keeps per session in its persistence.
 *
 * - Outgoing: a persistent session (clean session 0) has every QoS 1 message to it queued until
 *   it acknowledges it, whether it is offline or connected and not answering. At most
 *   `maxQueued` are kept; later ones are dropped. When the last free place would go to a message
 *   on the tote's errors topic, it gets `{"error": "queue_full", …}` instead, so the tote learns
 *   that what follows was lost. (A connected session that leaves that many messages
 *   unacknowledged is disconnected by aedes when the next one cannot be tracked.)
 *   A clean session empties the queue [MQTT-3.1.2-6]: aedes clears each message instead of
 *   sending it, which frees its place here too.
 * - Incoming QoS 2: aedes keeps each packet until its PUBREL only to know its id was seen
 *   (readings are handed to ingest before the PUBREC), so the payload is not kept.
 */
export function boundSessionQueues(persistence: QueuePersistence, maxQueued: number, events: QueueEvents): void {
  const queued = new Map<string, number>()

  const admit = (clientId: string, packet: Packet): Packet | null => {
    const n = queued.get(clientId) ?? 0
    if (n >= maxQueued) {
      events.dropped(clientId)
      return null
    }
    queued.set(clientId, n + 1)
    if (n + 1 < maxQueued) return packet
    events.filled(clientId)
    if (!isErrorsTopic(packet.topic)) return packet
    const notice = {
      error: 'queue_full',
      reason: `${maxQueued} messages are waiting for this session to acknowledge them; later ones are dropped until it does`,
      at: new Date().toISOString(),
    }
    return { ...packet, payload: Buffer.from(JSON.stringify(notice)) }
  }
  const cleared = (clientId: string) => {
    const n = (queued.get(clientId) ?? 0) - 1
    if (n > 0) queued.set(clientId, n)
    else queued.delete(clientId)
  }

  const enqueue = persistence.outgoingEnqueue.bind(persistence)
  const enqueueCombi = persistence.outgoingEnqueueCombi.bind(persistence)
  const clearMessageId = persistence.outgoingClearMessageId.bind(persistence)
  const storeIncoming = persistence.incomingStorePacket.bind(persistence)

  persistence.outgoingEnqueue = async (sub, packet) => {
    const admitted = admit(sub.clientId, packet)
    if (admitted !== null) await enqueue(sub, admitted)
  }
  persistence.outgoingEnqueueCombi = async (subs, packet) => {
    for (const sub of subs) {
      const admitted = admit(sub.clientId, packet)
      if (admitted !== null) await enqueueCombi([sub], admitted)
    }
  }
  persistence.outgoingClearMessageId = async (client, packet) => {
    const removed = await clearMessageId(client, packet)
    if (removed !== undefined) cleared(client.id)
    return removed
  }
  persistence.incomingStorePacket = (client, packet) => storeIncoming(client, { ...packet, payload: EMPTY })
}

const EMPTY = Buffer.alloc(0)
