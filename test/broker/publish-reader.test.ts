import type { Client } from 'aedes'
import mqttPacket from 'mqtt-packet'
import { describe, expect, it } from 'vitest'
import { readPublishesDirectly } from '../../broker/publish-reader.js'
import { mulberry32 } from '../helpers/prng.js'

type Parser = ReturnType<typeof mqttPacket.parser>

/** What a parser emitted, as comparable values: every packet in order, then any error. */
function feed(parser: Parser, chunks: Buffer[]) {
  const seen: unknown[] = []
  // Payloads as copies: a view's offset into its read may differ, its bytes may not.
  parser.on('packet', (p: mqttPacket.Packet) =>
    seen.push({ ...p, ...('payload' in p && p.payload ? { payload: Buffer.from(p.payload) } : {}) }),
  )
  parser.on('error', (e: Error) => seen.push(`error: ${e.message}`))
  for (const chunk of chunks) parser.parse(chunk)
  return seen
}

/** mqtt-packet alone, and mqtt-packet behind readPublishesDirectly, over the same reads. */
function both(chunks: Buffer[]) {
  const direct = mqttPacket.parser()
  readPublishesDirectly({ _parser: direct } as unknown as Client)
  return { expected: feed(mqttPacket.parser(), chunks), actual: feed(direct, chunks) }
}

const topic = (n: number) => `rxtrace/v1/totes/tt_${n}/readings`
const publish = (qos: 0 | 1 | 2, bytes: number, n: number) =>
  mqttPacket.generate({
    cmd: 'publish',
    topic: topic(n % 3),
    payload: Buffer.alloc(bytes, 0x61 + (n % 26)),
    qos,
    messageId: qos > 0 ? (n * 7919) % 65_536 || 1 : undefined,
    retain: n % 5 === 0,
    dup: qos > 0 && n % 7 === 0,
  } as mqttPacket.IPublishPacket)
const others = [
  mqttPacket.generate({ cmd: 'pingreq' }),
  mqttPacket.generate({ cmd: 'puback', messageId: 42 }),
  mqttPacket.generate({ cmd: 'subscribe', messageId: 3, subscriptions: [{ topic: 'rxtrace/v1/totes/tt_1/errors', qos: 1 }] }),
]

describe('readPublishesDirectly', () => {
  it('emits what mqtt-packet emits, in the same order, however the stream is cut into reads', () => {
    const random = mulberry32(20_260_124)
    for (let round = 0; round < 200; round++) {
      const packets: Buffer[] = []
      const count = 1 + Math.floor(random() * 12)
      for (let n = 0; n < count; n++) {
        const kind = random()
        if (kind < 0.8) packets.push(publish((Math.floor(random() * 3) % 3) as 0 | 1 | 2, Math.floor(random() * 400), round + n))
        else packets.push(others[Math.floor(random() * others.length)]!)
      }
      const stream = Buffer.concat(packets)
      // Cut at random places, and once at every packet boundary (the usual case: whole packets per read).
      const chunks: Buffer[] = []
      for (let at = 0; at < stream.length;) {
        const size = random() < 0.5 ? stream.length : 1 + Math.floor(random() * 300)
        chunks.push(stream.subarray(at, at + size))
        at += size
      }
      const { expected, actual } = both(chunks)
      expect(actual, `round ${round}`).toEqual(expected)
      expect(both(packets).actual, `round ${round}, one packet per read`).toEqual(expected)
    }
  })

  it('leaves malformed packets to mqtt-packet, which reports them', () => {
    const qos3 = Buffer.from([0x36, 0x04, 0x00, 0x01, 0x61, 0x00])
    const topicPastEnd = Buffer.from([0x30, 0x03, 0x00, 0x09, 0x61])
    const fiveByteLength = Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01])
    for (const bad of [qos3, topicPastEnd, fiveByteLength]) {
      const { expected, actual } = both([Buffer.concat([publish(1, 10, 1), bad])])
      expect(actual).toEqual(expected)
      expect(actual.at(-1)).toMatch(/^error: /)
    }
  })

  it('gives each packet its own payload bytes and the topic of its own bytes', () => {
    const direct = mqttPacket.parser()
    readPublishesDirectly({ _parser: direct } as unknown as Client)
    const seen: mqttPacket.IPublishPacket[] = []
    direct.on('packet', (p) => seen.push(p as mqttPacket.IPublishPacket))
    direct.parse(Buffer.concat([publish(1, 5, 1), publish(1, 5, 2), publish(0, 5, 3)]))
    expect(seen.map((p) => [p.topic, String(p.payload), p.messageId])).toEqual([
      [topic(1), 'bbbbb', 7919],
      [topic(2), 'ccccc', 15_838],
      [topic(0), 'ddddd', undefined],
    ])
    expect('messageId' in seen[2]!).toBe(false) // as mqtt-packet: no messageId on QoS 0
  })
})
