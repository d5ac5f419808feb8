import type { Client, PublishPacket } from 'aedes'

/** The parts of aedes' Client (lib/client.js) that its own PUBACK write uses (lib/write.js). */
type ClientInternals = {
  connecting: boolean
  connected: boolean
  errored: boolean
  conn: { write(chunk: Uint8Array): boolean; cork(): void; uncork(): void; writableCorked: number }
  waitForDrain(callback: (error?: Error) => void): void
}

/** PUBACK [MQTT-3.4]: type 4, remaining length 2, the message id big-endian. aedes speaks 3.1 and 3.1.1 only, so no reason code. */
const PUBACK_TYPE = 0x40
/** One per message id, made when first needed: each PUBACK is one write of bytes that already exist. */
const pubacks: (Buffer | undefined)[] = new Array(65_536)

function pubackOf(messageId: number): Buffer {
  let bytes = pubacks[messageId]
  if (bytes === undefined) pubacks[messageId] = bytes = Buffer.from([PUBACK_TYPE, 2, messageId >> 8, messageId & 0xff])
  return bytes
}

/**
 * Lets aedes go on with an accepted PUBLISH (`done` is the authorizePublish callback); for QoS 1
 * the PUBACK is written here first.
 *
 * aedes would write it through mqtt-packet's writeToStream: the socket corked, three writes of
 * 1-2 bytes, a tick later an uncork and a writev, a dozen calls to a disabled debug logger, then a
 * setImmediate before reading on (~2 KB of garbage and a fifth of the service's CPU per reading
 * at 10,000 single readings/s). Here it is one write of 4 bytes; the packet then goes on as
 * QoS 0, which aedes does not acknowledge, so nothing is sent twice. What aedes does around the
 * write is kept: no write on a connection that is gone (aedes then reports it), and with the
 * socket's buffer full the tote's next packets wait for it to drain.
 *
 * The socket is corked until the end of the tick, as mqtt-packet does: a group commit answers all
 * its publishes in one tick, and a tote with several of them in that commit (a backlog after a
 * reconnect, a gateway's burst) gets their PUBACKs in one system call, not one each. On loopback
 * each write delivers to the reader inside the writer's system call, about a fifth of the
 * service's CPU per reading under load.
 */
export function acknowledge(client: Client, packet: PublishPacket, done: (error?: Error | null) => void): void {
  const c = client as unknown as ClientInternals
  if (packet.qos !== 1 || typeof packet.messageId !== 'number' || !(c.connecting || c.connected)) return done(null)
  const conn = c.conn
  if (conn.writableCorked === 0) {
    conn.cork()
    process.nextTick(uncork, conn)
  }
  const flushed = conn.write(pubackOf(packet.messageId))
  packet.qos = 0
  if (flushed || c.errored) done(null)
  else c.waitForDrain((error) => done(error ?? null))
}

const uncork = (conn: ClientInternals['conn']) => conn.uncork()
