import { connect, type Socket } from 'node:net'
import mqtt from 'mqtt'
import { describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { waitFor } from '../helpers/wait.js'
import { aReading, closed, connectTote, errors, PASSWORDS, readings, startBroker, tcp } from './harness.js'

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
  socket.once('close', () => {
    ended = true
  })
  await new Promise<void>((resolve) => socket.once('connect', resolve))
  let written = 0
  const write = (chunk: Buffer) =>
    new Promise<boolean>((resolve) => {
      if (ended || socket.destroyed) return resolve(false)
      const ok = socket.write(chunk, (err) => {
        if (err) resolve(false)
      })
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
    socket.once('close', () => {
      ended = true
    })
    await new Promise((resolve) => socket.once('open', resolve))
    const send = (data: Buffer) =>
      new Promise<boolean>((resolve) => {
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
    void alpha
      .publishAsync(readings('tt_alpha'), JSON.stringify({ ts: Date.now(), temp_c: 4.5, pad: 'x'.repeat(4_096) }), { qos: 1 })
      .catch(() => {})
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
    const trickle = setInterval(() => {
      if (!socket.destroyed) socket.write(Buffer.from([0x00]))
    }, 50)
    try {
      await gone
    } finally {
      clearInterval(trickle)
    }
    expect(socket.destroyed).toBe(true)
  }, 10_000)
})

describe('sessions per tote', () => {
  const connectAs = (url: string, clientId: string, clean: boolean) => connectTote(url, 'tt_alpha', undefined, { clientId, clean })
  const connects = (url: string, clientId: string, clean: boolean) =>
    connectAs(url, clientId, clean).then(
      () => true,
      () => false,
    )

  it('refuses a session beyond the tote’s four with CONNACK 2, offline persistent ones included, and keeps serving other totes', async () => {
    const { broker, stored } = await startBroker()
    const url = tcp(broker)
    for (const n of [1, 2, 3, 4]) await (await connectAs(url, `tt_alpha-${n}`, false)).endAsync() // persistent sessions outlive their connections
    for (let n = 5; n < 25; n++) {
      await expect(connectAs(url, `tt_alpha-${n}`, n % 2 === 0)).rejects.toMatchObject({ code: 2 })
    }
    // A client id it holds still connects; connecting once with a clean session ends that session and frees its place.
    await (await connectAs(url, 'tt_alpha-1', true)).endAsync()
    await waitFor(() => connects(url, 'tt_alpha-5', true), 5_000, 'a freed session') // stays connected
    await expect(connectAs(url, 'tt_alpha-6', false)).rejects.toMatchObject({ code: 2 })

    const bravo = await connectTote(url, 'tt_bravo')
    await bravo.publishAsync(readings('tt_bravo'), aReading(), { qos: 1 })
    expect(stored.map((s) => s.toteId)).toEqual(['tt_bravo'])
  })
})

describe('messages queued per session', () => {
  type Reason = { error: string; reason: string }
  /** Connects a persistent session under `clientId`, collecting the errors it is sent (queued ones arrive before CONNACK completes). */
  async function listen(url: string, clientId: string, clean = false) {
    const received: Reason[] = []
    const client = mqtt.connect(url, {
      protocolVersion: 4,
      clientId,
      clean,
      username: 'tt_alpha',
      password: PASSWORDS.tt_alpha,
      reconnectPeriod: 0,
    })
    client.on('message', (_topic, payload) => received.push(JSON.parse(payload.toString()) as Reason))
    await new Promise<void>((resolve, reject) => client.once('connect', () => resolve()).once('error', reject))
    return { client, received }
  }

  it('keeps at most 100 messages for an offline session, the last saying the queue is full, and keeps serving other totes', async () => {
    const { broker, stored } = await startBroker()
    const url = tcp(broker)
    const first = await listen(url, 'tt_alpha-errors')
    await first.client.subscribeAsync(errors('tt_alpha'), { qos: 1 })
    await first.client.endAsync()

    const alpha = await connectTote(url, 'tt_alpha')
    for (let i = 0; i < 300; i++) await alpha.publishAsync(readings('tt_alpha'), 'not json', { qos: 1 })

    const back = await listen(url, 'tt_alpha-errors')
    try {
      await waitFor(() => back.received.length >= 100, 5_000, 'the queued messages')
      // One more refusal, sent once the queue has been delivered: it is the next message, not the 301st.
      await alpha.publishAsync(readings('tt_alpha'), JSON.stringify({ ts: Date.now(), temp_c: 120 }), { qos: 1 })
      await waitFor(() => back.received.some((r) => r.error === 'temp_out_of_range'), 5_000, 'the newest refusal')
      expect(back.received).toHaveLength(101)
      expect(back.received.slice(0, 99).every((r) => r.error === 'invalid_json')).toBe(true)
      expect(back.received[99]).toMatchObject({ error: 'queue_full', reason: expect.stringContaining('100 messages') })
    } finally {
      await back.client.endAsync(true)
    }

    const bravo = await connectTote(url, 'tt_bravo')
    await bravo.publishAsync(readings('tt_bravo'), aReading(), { qos: 1 })
    expect(stored.map((s) => s.toteId)).toEqual(['tt_bravo'])
  })
})
