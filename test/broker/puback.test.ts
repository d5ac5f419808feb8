import { Writable } from 'node:stream'
import type { Client, PublishPacket } from 'aedes'
import { describe, expect, it } from 'vitest'
import { acknowledge } from '../../broker/puback.js'

/** A connection as acknowledge() sees it, over a real Writable that records each write it is asked to make. */
function connection() {
  const writes: number[][] = []
  const conn = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      writes.push([chunk.readUInt16BE(2)])
      callback()
    },
    writev(chunks, callback) {
      writes.push(chunks.map(({ chunk }) => (chunk as Buffer).readUInt16BE(2)))
      callback()
    },
  })
  const client = { connecting: false, connected: true, errored: false, conn, waitForDrain: () => {} } as unknown as Client
  return { client, writes }
}

const publish = (messageId: number) =>
  ({ cmd: 'publish', qos: 1, messageId, topic: 't', payload: Buffer.alloc(0) }) as unknown as PublishPacket
const nextTick = () => new Promise((resolve) => setImmediate(resolve))

describe('PUBACK writes', () => {
  it('sends the PUBACKs a tote is owed in one tick as one write, in order', async () => {
    const { client, writes } = connection()
    const answered: number[] = []
    for (const id of [7, 8, 9]) acknowledge(client, publish(id), () => answered.push(id))
    await nextTick()
    expect(answered).toEqual([7, 8, 9])
    expect(writes).toEqual([[7, 8, 9]])

    acknowledge(client, publish(10), () => {})
    await nextTick()
    expect(writes).toEqual([[7, 8, 9], [10]])
  })

  it('hands a QoS 1 publish on to aedes as QoS 0, so aedes does not acknowledge it again', () => {
    const { client } = connection()
    const packet = publish(1)
    acknowledge(client, packet, () => {})
    expect(packet.qos).toBe(0)
  })
})
