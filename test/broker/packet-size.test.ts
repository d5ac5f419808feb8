import mqttPacket from 'mqtt-packet'
import { describe, expect, it } from 'vitest'
import { PacketSizeGuard } from '../../broker/packet-size.js'

const publish = (bytes: number) =>
  mqttPacket.generate({
    cmd: 'publish',
    topic: 'rxtrace/v1/totes/tt_a/readings',
    payload: Buffer.alloc(bytes, 0x61),
    qos: 1,
    messageId: 7,
    retain: false,
    dup: false,
  })
const pingreq = mqttPacket.generate({ cmd: 'pingreq' })

describe('PacketSizeGuard', () => {
  // Packets whose remaining lengths take 1, 2 and 3 bytes, and one with none at all.
  const stream = Buffer.concat([publish(10), pingreq, publish(300), publish(20_000), pingreq, publish(1_000)])

  it('follows packets of every length encoding across any split of the stream, and lets them all through', () => {
    for (let split = 1; split < 64; split++) {
      const guard = new PacketSizeGuard(32 * 1024)
      let accepted = true
      for (let i = 0; i < stream.length; i += split) accepted &&= guard.accept(stream.subarray(i, i + split))
      expect(accepted, `split every ${split} bytes`).toBe(true)
    }
  })

  it('refuses at the header of the first packet over the limit, even when the length arrives a byte at a time', () => {
    const guard = new PacketSizeGuard(1_024)
    const bytes = Buffer.concat([publish(100), publish(5_000)])
    const verdicts = [...bytes].map((byte) => guard.accept(Buffer.from([byte])))
    const refusedAt = verdicts.indexOf(false)
    expect(refusedAt).toBe(publish(100).length + 2) // type byte, then the second byte of the length
    expect(guard.declared).toBe(publish(5_000).length - 3)
    expect(verdicts.slice(refusedAt).every((v) => v === false)).toBe(true)
  })

  it('refuses a remaining length longer than the four bytes MQTT allows', () => {
    expect(new PacketSizeGuard(1_024).accept(Buffer.from([0x30, 0xff, 0xff, 0xff, 0xff, 0x01]))).toBe(false)
  })
})
