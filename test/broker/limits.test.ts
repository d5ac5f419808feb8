import { connect, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { aReading, closed, connectTote, readings, startBroker, tcp } from './harness.js'

/** MQTT 3.1.1 §2.2.3: the remaining length as a variable byte integer. */
function varint(n: number): Buffer {
  const bytes: number[] = []
  do {
    let byte = n % 128
    n = Math.floor(n / 128)
    if (n > 0) byte |= 0x80
    bytes.push(byte)
  } while (n > 0)
  return Buffer.from(bytes)
}

/** The largest remaining length MQTT can declare: 268,435,455 bytes (256 MiB − 1). */
const HUGE = 268_435_455
const CHUNK = Buffer.alloc(64 * 1024, 0x61)
/** What the attacker tries to push after the fixed header; far more than any socket buffer holds. */
const STREAM_BYTES = 32 * 1024 * 1024

/**
 * Writes `header`, then up to STREAM_BYTES of body, each write waiting for the last to drain.
 * Resolves with how many bytes the socket took and whether the server ended the connection first.
 */
async function streamHugePacket(socket: Socket, header: Buffer) {
  let ended = false
  socket.on('error', () => {})
  socket.once('close', () => { ended = true })
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  let written = 0
  const write = (chunk: Buffer) => new Promise<boolean>((resolve) => {
    if (ended || socket.destroyed) return resolve(false)
    const ok = socket.write(chunk, (err) => { if (err) resolve(false) })
    if (ok) setImmediate(() => resolve(!ended))
    else socket.once('drain', () => resolve(!ended)).once('close', () => resolve(false))
  })
  if (!(await write(header))) return { written, ended }
  while (written < STREAM_BYTES && (await write(CHUNK))) written += CHUNK.length
  await new Promise((resolve) => setImmediate(resolve))
  return { written, ended: ended || socket.destroyed }
}

describe('packet size, before authentication', () => {
  it('closes a TCP connection whose CONNECT declares 256 MiB as soon as the length is read, without taking the body', async () => {
    const { broker } = await startBroker()
    const socket = connect(broker.tcpPort, '127.0.0.1')
    const { written, ended } = await streamHugePacket(socket, Buffer.concat([Buffer.from([0x10]), varint(HUGE)]))
    expect(ended).toBe(true)
    // What the kernel buffers on both sides before the close arrives, nowhere near what was offered.
    expect(written).toBeLessThan(STREAM_BYTES / 2)
  })

  it('does the same over WebSocket, where the packet would span many WebSocket messages', async () => {
    const { broker } = await startBroker()
    const socket = new WebSocket(`ws://127.0.0.1:${broker.wsPort}/mqtt`, 'mqtt')
    let ended = false
    socket.on('error', () => {})
    socket.once('close', () => { ended = true })
    await new Promise((resolve) => socket.once('open', resolve))
    const send = (data: Buffer) => new Promise<boolean>((resolve) => {
      if (ended) return resolve(false)
      socket.send(data, (err) => resolve(!err && !ended))
    })
    let written = 0
    if (await send(Buffer.concat([Buffer.from([0x10]), varint(HUGE)]))) {
      while (written < STREAM_BYTES && (await send(CHUNK))) written += CHUNK.length
    }
    if (written < STREAM_BYTES) await new Promise<void>((resolve) => (ended ? resolve() : socket.once('close', () => resolve())))
    expect(ended).toBe(true)
    expect(written).toBeLessThan(STREAM_BYTES / 2)
  })

  it('closes an authenticated connection that declares a PUBLISH over the configured limit, and takes one under it', async () => {
    const { broker, stored } = await startBroker({ limits: { maxPacketBytes: 2_048 } })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })
    const gone = closed(alpha)
    void alpha.publishAsync(readings('tt_alpha'), JSON.stringify({ ts: Date.now(), temp_c: 4.5, pad: 'x'.repeat(4_096) }), { qos: 1 }).catch(() => {})
    await gone
    expect(stored).toHaveLength(1)
  }, 10_000)
})

describe('CONNECT deadline', () => {
  it('closes a connection that has not completed its CONNECT in time, even while it trickles bytes', async () => {
    const { broker } = await startBroker({ limits: { connectTimeoutMs: 300 } })
    const socket = connect(broker.tcpPort, '127.0.0.1')
    socket.on('error', () => {})
    const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()))
    await new Promise<void>((resolve) => socket.once('connect', resolve))
    socket.write(Buffer.concat([Buffer.from([0x10]), varint(10_000), Buffer.from([0x00])]))
    const trickle = setInterval(() => { if (!socket.destroyed) socket.write(Buffer.from([0x00])) }, 50)
    try {
      await gone
    } finally {
      clearInterval(trickle)
    }
    expect(socket.destroyed).toBe(true)
  }, 10_000)
})
