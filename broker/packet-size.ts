import type { Client } from 'aedes'

/**
 * Refuses an MQTT packet whose declared remaining length is over the limit as soon as that length
 * has been read, before any of the packet's body is buffered, and before CONNECT is authenticated.
 *
 * mqtt-packet (aedes' parser) has no size limit: it appends every byte it is given until the
 * declared length has arrived, so a client that declares 256 MiB and streams bytes makes the
 * broker hold them all. This guard sits in front of that parser and follows the packet framing
 * itself (MQTT 3.1.1 §2.2: one type byte, a remaining length of 1–4 bytes, then that many bytes).
 * The cost is a few comparisons per packet; a packet's body is skipped, never read.
 */
export class PacketSizeGuard {
  /** Body bytes of the current packet still to skip. */
  private skip = 0
  /** Reading a remaining length (after its packet's type byte). */
  private inLength = false
  private length = 0
  private multiplier = 1
  /** The remaining length that broke the limit (for the log); once set, every chunk is refused. */
  declared = 0

  constructor(private readonly maxBytes: number) {}

  /** Follows the packets in `chunk`; false once one declares more than the limit. */
  accept(chunk: Uint8Array): boolean {
    if (this.declared > 0) return false
    const end = chunk.length
    let i = 0
    while (i < end) {
      if (this.skip > 0) {
        const step = Math.min(this.skip, end - i)
        this.skip -= step
        i += step
      } else if (!this.inLength) {
        i++ // the fixed header's first byte: packet type and flags
        this.inLength = true
        this.length = 0
        this.multiplier = 1
      } else {
        const byte = chunk[i++]!
        this.length += (byte & 0x7f) * this.multiplier
        this.multiplier *= 128
        if (byte & 0x80) {
          // [MQTT-2.2.3] at most four bytes; a fifth means a malformed (and enormous) length
          if (this.multiplier > 128 ** 3) return this.refuse(Number.POSITIVE_INFINITY)
          continue
        }
        if (this.length > this.maxBytes) return this.refuse(this.length)
        this.inLength = false
        this.skip = this.length
      }
    }
    return true
  }

  private refuse(declared: number): false {
    this.declared = declared
    return false
  }
}

type Parser = { parse(chunk: Uint8Array): number; emit(event: 'error', error: Error): boolean }

/**
 * Puts a `PacketSizeGuard` in front of a connection's parser. aedes hands each read of the socket
 * to `client._parser.parse`; a chunk that carries an oversized header is not parsed at all, and the
 * parser reports an error instead, which aedes handles as it does a malformed packet: it destroys
 * the connection (and emits `connectionError`, or `clientError` once CONNECT has been seen).
 */
export function guardPacketSize(client: Client, maxBytes: number, onRefused: (declared: number) => void): void {
  const parser = (client as unknown as { _parser: Parser })._parser
  const guard = new PacketSizeGuard(maxBytes)
  const parse = parser.parse.bind(parser)
  parser.parse = (chunk) => {
    if (guard.accept(chunk)) return parse(chunk)
    parser.parse = () => 0 // whatever is still in the socket's buffer is dropped with it
    onRefused(guard.declared)
    parser.emit('error', new Error(`packet of ${guard.declared} bytes is over the limit of ${maxBytes}`))
    return 0
  }
}
