import { createServer, type Server } from 'node:net'
import type { AddressInfo } from 'node:net'
import type { MqttClient } from 'mqtt'
import { Counter, Registry } from 'prom-client'
import { describe, expect, it } from 'vitest'
import { IngestUnavailableError } from '../../broker/index.js'
import { timeForAWrongAnswer } from '../helpers/wait.js'
import { aReading, closed, connectTote, errors, readings, startBroker, tcp } from './harness.js'

function deferred() {
  let resolve!: () => void
  const promise = new Promise<void>((r) => (resolve = r))
  return { promise, resolve }
}

const nextMessage = (client: MqttClient) =>
  new Promise<{ topic: string; body: unknown }>((resolve) =>
    client.once('message', (topic, payload) => resolve({ topic, body: JSON.parse(payload.toString()) })),
  )

describe('connecting', () => {
  it('accepts a tote with its own id and password', async () => {
    const { broker } = await startBroker()
    const client = await connectTote(tcp(broker), 'tt_alpha')
    expect(client.connected).toBe(true)
  })

  it('refuses a wrong password with CONNACK 4 (bad user name or password)', async () => {
    const { broker } = await startBroker()
    await expect(connectTote(tcp(broker), 'tt_alpha', 'guess')).rejects.toMatchObject({ code: 4 })
    await expect(connectTote(tcp(broker), 'tt_nobody', 'x')).rejects.toMatchObject({ code: 4 })
  })

  it('refuses a client id that is not the tote’s own with CONNACK 2, so no tote can take over another’s session', async () => {
    const { broker } = await startBroker()
    await expect(connectTote(tcp(broker), 'tt_alpha', undefined, { clientId: 'tt_bravo' })).rejects.toMatchObject({ code: 2 })
    await expect(connectTote(tcp(broker), 'tt_alpha', undefined, { clientId: 'tt_alphabet' })).rejects.toMatchObject({ code: 2 })
    const second = await connectTote(tcp(broker), 'tt_alpha', undefined, { clientId: 'tt_alpha-errors' })
    const anonymous = await connectTote(tcp(broker), 'tt_alpha', undefined, { clientId: '' })
    expect([second.connected, anonymous.connected]).toEqual([true, true])
  })

  it('refuses with CONNACK 3 when credentials cannot be checked', async () => {
    const { broker } = await startBroker({
      authenticateTote: async () => {
        throw new Error('store down')
      },
    })
    await expect(connectTote(tcp(broker), 'tt_alpha')).rejects.toMatchObject({ code: 3 })
  })
})

describe('access control', () => {
  it('closes the connection of a tote that publishes to another tote’s topic (MQTT 3.1.1 §3.3.5)', async () => {
    const { broker, stored } = await startBroker()
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    const gone = closed(alpha)
    alpha.publish(readings('tt_bravo'), aReading(), { qos: 1 })
    await gone
    expect(stored).toEqual([])
  })

  it('refuses a subscription to another tote’s errors with SUBACK 0x80 and keeps the connection', async () => {
    const { broker } = await startBroker()
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    // mqtt.js turns return code 0x80 into a rejection carrying the SUBACK
    await expect(alpha.subscribeAsync(errors('tt_bravo'), { qos: 1 })).rejects.toMatchObject({ packet: { granted: [128] } })
    await expect(alpha.subscribeAsync('rxtrace/v1/totes/+/errors', { qos: 1 })).rejects.toMatchObject({ packet: { granted: [128] } })
    const [own] = await alpha.subscribeAsync(errors('tt_alpha'), { qos: 1 })
    expect(own?.qos).toBe(1)
    expect(alpha.connected).toBe(true)
  })
})

describe('ingest', () => {
  it('sends the PUBACK of a QoS 1 reading only after onReadings has resolved', async () => {
    const committed = deferred()
    let called = 0
    const { broker } = await startBroker({
      onReadings: async () => {
        called++
        await committed.promise
      },
    })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')

    let acked = false
    const publishing = alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 }).then(() => {
      acked = true
    })
    await expect.poll(() => called).toBe(1)
    await timeForAWrongAnswer(200) // ample time for a PUBACK that was not held back
    expect(acked).toBe(false)

    committed.resolve()
    await publishing
    expect(acked).toBe(true)
  })

  it('acknowledges in arrival order even when a later publish is stored first [MQTT-4.6.0-2]', async () => {
    const first = deferred()
    let n = 0
    const { broker } = await startBroker({
      onReadings: async () => {
        if (n++ === 0) await first.promise
      },
    })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    const acks: number[] = []
    alpha.on('packetreceive', (packet) => {
      if (packet.cmd === 'puback') acks.push(packet.messageId!)
    })

    const sent: number[] = []
    alpha.on('packetsend', (packet) => {
      if (packet.cmd === 'publish') sent.push(packet.messageId!)
    })
    const both = Promise.all([1, 2].map(() => alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })))
    await expect.poll(() => n).toBe(2)
    await timeForAWrongAnswer(50) // for the second PUBACK, were it sent as soon as stored
    first.resolve()
    await both
    expect(acks).toEqual(sent)
  })

  it('publishes why a payload was refused on the tote’s errors topic and keeps serving it', async () => {
    const { broker, stored } = await startBroker()
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    await alpha.subscribeAsync(errors('tt_alpha'), { qos: 1 })

    const message = nextMessage(alpha)
    await alpha.publishAsync(readings('tt_alpha'), 'not json', { qos: 1 })
    expect(await message).toEqual({
      topic: errors('tt_alpha'),
      body: { error: 'invalid_json', reason: 'payload is not valid JSON', at: expect.stringMatching(/Z$/) },
    })

    const tooHot = nextMessage(alpha)
    await alpha.publishAsync(readings('tt_alpha'), JSON.stringify({ ts: Date.now(), temp_c: 120 }), { qos: 0 })
    expect((await tooHot).body).toMatchObject({ error: 'temp_out_of_range' })

    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })
    expect(alpha.connected).toBe(true)
    expect(stored).toEqual([{ toteId: 'tt_alpha', readings: [expect.objectContaining({ temp_c: 4.5 })], qos: 1 }])
  })

  it('stores QoS 0 and QoS 2 publishes too, QoS 2 handed to ingest as at-least-once', async () => {
    const { broker, stored } = await startBroker()
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 2 })
    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 0 })
    await expect.poll(() => stored.length).toBe(2)
    expect(stored.map((s) => s.qos)).toEqual([1, 0])
  })

  it('counts publishes by outcome and refusals by kind, in prom-client counters', async () => {
    const registers = [new Registry()]
    const metrics = {
      readingsPublishes: new Counter({ name: 'mqtt_readings_publishes_total', help: 'x', labelNames: ['outcome'] as const, registers }),
      aclDenied: new Counter({ name: 'mqtt_acl_denied_total', help: 'x', labelNames: ['action'] as const, registers }),
      connectionsRefused: new Counter({ name: 'mqtt_connections_refused_total', help: 'x', labelNames: ['reason'] as const, registers }),
    }
    const { broker } = await startBroker({ metrics })
    await expect(connectTote(tcp(broker), 'tt_alpha', 'guess')).rejects.toMatchObject({ code: 4 })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })
    await alpha.publishAsync(readings('tt_alpha'), '[]', { qos: 1 })
    await alpha.subscribeAsync(errors('tt_bravo')).catch(() => {})
    const values = async (c: Counter<string>) => (await c.get()).values.map((v) => [v.labels, v.value])
    expect(await values(metrics.readingsPublishes)).toEqual([
      [{ outcome: 'accepted' }, 1],
      [{ outcome: 'rejected' }, 1],
    ])
    expect(await values(metrics.connectionsRefused)).toEqual([[{ reason: 'bad_credentials' }, 1]])
    expect(await values(metrics.aclDenied)).toEqual([[{ action: 'subscribe' }, 1]])
  })

  it.each([
    ['says so', () => new IngestUnavailableError('disk full')],
    ['fails in a way nobody foresaw', () => new TypeError('cannot read properties of undefined')],
  ])('withholds the PUBACK and drops the connection when storing the readings %s', async (_, failure) => {
    const { broker } = await startBroker({
      onReadings: async () => {
        throw failure()
      },
    })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    let acked = false
    const gone = closed(alpha)
    void alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 }).then(
      () => {
        acked = true
      },
      () => {},
    )
    await gone
    expect(acked).toBe(false)
  })

  it('keeps the publish of one tote from reaching another tote', async () => {
    const { broker } = await startBroker()
    const bravo = await connectTote(tcp(broker), 'tt_bravo')
    await bravo.subscribeAsync(errors('tt_bravo'), { qos: 1 })
    const received: string[] = []
    bravo.on('message', (topic) => received.push(topic))
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    await alpha.subscribeAsync(errors('tt_alpha'), { qos: 1 })
    const alphaError = nextMessage(alpha)
    await alpha.publishAsync(readings('tt_alpha'), 'not json', { qos: 1 })
    await alphaError
    // Bravo's own error comes after anything routed to it before: alpha's, had it leaked.
    const bravoError = nextMessage(bravo)
    await bravo.publishAsync(readings('tt_bravo'), 'not json', { qos: 1 })
    await bravoError
    expect(received).toEqual([errors('tt_bravo')])
  })
})

describe('listeners', () => {
  it('speaks MQTT over WebSocket at /mqtt', async () => {
    const { broker, stored } = await startBroker()
    const alpha = await connectTote(`ws://127.0.0.1:${broker.wsPort}/mqtt`, 'tt_alpha')
    await alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })
    expect(stored).toHaveLength(1)
  })

  it('names the port and the variable when a port is taken', async () => {
    const taken: Server = createServer()
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
    const port = (taken.address() as AddressInfo).port
    try {
      await expect(startBroker({ tcpPort: port })).rejects.toThrow(new RegExp(`MQTT_PORT=${port}: port ${port} is already in use`))
      await expect(startBroker({ wsPort: port })).rejects.toThrow(new RegExp(`MQTT_WS_PORT=${port}: port ${port} is already in use`))
    } finally {
      await new Promise((resolve) => taken.close(resolve))
    }
  })

  it('lets a publish being stored finish, acknowledged, before close() disconnects', async () => {
    const committed = deferred()
    let called = 0
    const { broker } = await startBroker({
      onReadings: () => {
        called++
        return committed.promise
      },
    })
    const alpha = await connectTote(tcp(broker), 'tt_alpha')
    const publishing = alpha.publishAsync(readings('tt_alpha'), aReading(), { qos: 1 })
    await expect.poll(() => called).toBe(1)
    const closing = broker.close()
    await timeForAWrongAnswer(50) // for close() to disconnect, were it not waiting for the store
    committed.resolve()
    await expect(publishing).resolves.toBeDefined()
    await closing
  })
})
