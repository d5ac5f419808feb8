import type { Client } from 'aedes'

/** The parts of mqtt-packet's Parser (parser.js) read here: its buffered bytes and state. */
type Parser = {
  parse(chunk: Uint8Array): number
  emit(event: 'packet', packet: object): boolean
  _list: { length: number }
  _stateCounter: number
  error: Error | null
  settings: { protocolVersion?: number }
}

type Publish = {
  cmd: 'publish'
  retain: boolean
  qos: 0 | 1 | 2
  dup: boolean
  length: number
  topic: string
  payload: Buffer
  messageId?: number
}

/**
 * Reads the PUBLISH packets of a socket read itself, and leaves everything else to aedes' parser
 * (mqtt-packet).
 *
 * mqtt-packet appends each read to a BufferList and walks a state machine over it, with about
 * twenty calls to a (disabled) debug logger per packet, each allocating its arguments, and a
 * Buffer view for every field it reads: ~2 KB of garbage and a few µs per reading at 10,000
 * single readings/s, where nearly every read is one or a few whole PUBLISH packets. Those are
 * decoded here into the same packet mqtt-packet would emit (cmd, retain, qos, dup, length, topic,
 * payload, and messageId for QoS 1 and 2) and emitted the same way, in order. The rest of a read
 * from the first packet that is not a whole, well-formed MQTT 3.1.1 PUBLISH goes to mqtt-packet as
 * it is, and so does any read while mqtt-packet holds part of a packet: it then carries on as
 * before, and reports malformed packets as before.
 *
 * The same tote publishes to the same topic every time: the last topic's text is kept per
 * connection and reused while the bytes match, so a reading allocates no topic string.
 */
export function readPublishesDirectly(client: Client): void {
  const parser = (client as unknown as { _parser: Parser })._parser
  const parse = parser.parse.bind(parser)
  const state: ReadState = { topicBytes: Buffer.alloc(0), topic: '', end: 0 }
  parser.parse = (chunk) => {
    // mqtt-packet is part way through a packet (or failed on one, or speaks MQTT 5): its bytes, its job.
    if (parser._list.length > 0 || parser._stateCounter !== 0 || parser.error !== null || parser.settings.protocolVersion === 5)
      return parse(chunk)
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    let at = 0
    while (at < bytes.length) {
      const publish = publishAt(bytes, at, state)
      if (publish === null) return parse(at === 0 ? chunk : bytes.subarray(at))
      at = state.end
      parser.emit('packet', publish)
    }
    return 0
  }
}

/** Per connection: the last topic (its bytes and text), and where the packet just read ends. */
type ReadState = { topicBytes: Buffer; topic: string; end: number }

/** The whole, well-formed PUBLISH at `at` (its end in state.end), or null: anything else, or not all of it here. */
function publishAt(bytes: Buffer, at: number, state: ReadState): Publish | null {
  const first = bytes[at]!
  const qos = (first >> 1) & 3
  if (first >> 4 !== 3 || qos === 3) return null // not a PUBLISH; QoS 3 is malformed [MQTT-3.3.1-4]
  // Remaining length [MQTT-2.2.3]: 1-4 bytes, 7 bits each, least significant first.
  let length = 0
  let i = at + 1
  for (let shift = 0; ; shift += 7) {
    if (i >= bytes.length || shift > 21) return null
    const b = bytes[i++]!
    length += (b & 0x7f) * 2 ** shift
    if ((b & 0x80) === 0) break
  }
  const end = i + length
  if (end > bytes.length || length < 2) return null
  const topicEnd = i + 2 + ((bytes[i]! << 8) | bytes[i + 1]!)
  const payloadStart = qos > 0 ? topicEnd + 2 : topicEnd
  if (payloadStart > end) return null
  const publish: Publish = {
    cmd: 'publish',
    retain: (first & 1) !== 0,
    qos: qos as 0 | 1 | 2,
    dup: (first & 8) !== 0,
    length,
    topic: topicOf(bytes, i + 2, topicEnd, state),
    payload: bytes.subarray(payloadStart, end),
  }
  if (qos > 0) publish.messageId = (bytes[topicEnd]! << 8) | bytes[topicEnd + 1]!
  state.end = end
  return publish
}

/** The topic's text (UTF-8, as mqtt-packet decodes it); the previous one when the bytes are the same. */
function topicOf(bytes: Buffer, start: number, end: number, state: ReadState): string {
  const length = end - start
  let same = length === state.topicBytes.length
  for (let k = 0; same && k < length; k++) same = bytes[start + k] === state.topicBytes[k]
  if (same) return state.topic
  state.topicBytes = Buffer.from(bytes.subarray(start, end))
  state.topic = state.topicBytes.toString('utf8')
  return state.topic
}
