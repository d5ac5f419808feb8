import mqtt, { type MqttClient } from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMosquitto, mosquittoAvailable, type Mosquitto } from '../helpers/mosquitto.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * `MQTT_URL` (docs/deployment.md): the service runs no broker; a real Mosquitto 2 with the
 * dynamic-security plugin authenticates totes with the accounts `POST /v1/totes` gave it, and
 * this copy ingests from the shared subscription through the same pipeline as the embedded broker.
 */

const readings = (toteId: string) => `rxtrace/v1/totes/${toteId}/readings`
const errors = (toteId: string) => `rxtrace/v1/totes/${toteId}/errors`

/** A tote's own MQTT 5 connection (MQTT 5, so that a refused publish comes back as a PUBACK reason code). */
const connectTote = (
  broker: Mosquitto,
  tote: { id: string; mqtt: { username: string; password: string } },
  clientId = tote.id,
): Promise<MqttClient> =>
  mqtt.connectAsync(`mqtt://127.0.0.1:${broker.port}`, {
    protocolVersion: 5,
    clientId,
    username: tote.mqtt.username,
    password: tote.mqtt.password,
    reconnectPeriod: 0,
  })

describe.skipIf(!mosquittoAvailable())('a copy on an external Mosquitto (MQTT_URL)', () => {
  let broker: Mosquitto
  let api: TestApi
  let admin: string
  let pharmacyId: string
  beforeAll(async () => {
    broker = await startMosquitto()
    api = await startTestService({ MQTT_URL: broker.serviceUrl, MQTT_PORT: '', MQTT_CLIENT_ID: 'rx_copy_a', MQTT_INGEST_CONNECTIONS: '2' })
    await api.service.start()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
  })
  afterAll(async () => {
    await api?.stop()
    await broker?.dispose()
  })

  it('runs no broker of its own', () => {
    expect(api.service.broker).toBeNull()
    expect(api.service.externalBroker).not.toBeNull()
  })

  it("gives the broker a new tote's account: the tote connects with its credentials and its QoS 1 readings are stored", async () => {
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    expect(await api.service.accounts!.pending()).toBe(0)
    const client = await connectTote(broker, tote)
    const ts = Date.now()
    for (let i = 0; i < 20; i++)
      await client.publishAsync(readings(tote.id), JSON.stringify({ ts: ts - i * 1_000, temp_c: 4 + i / 10 }), { qos: 1 })
    await waitFor(
      async () => (await api.service.sink.readingsForTote(tote.id, ts - 60_000, ts + 1)).length === 20,
      10_000,
      '20 readings stored',
    )
    await client.endAsync()
  })

  it('refuses the tote a wrong password', async () => {
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    await expect(connectTote(broker, { id: tote.id, mqtt: { username: tote.id, password: 'not-its-password' } })).rejects.toThrow(
      /Bad User Name or Password|Not authorized/i,
    )
  })

  it('lets a tote publish only to its own readings topic and subscribe only to its own errors and commands', async () => {
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    const other = await api.tote(admin, { pharmacy_id: pharmacyId })
    const intruder = await connectTote(broker, tote)
    // MQTT 5 §3.4.2.1: PUBACK 0x87 Not authorized; Mosquitto then closes the connection, as the embedded broker does.
    await expect(intruder.publishAsync(readings(other.id), JSON.stringify({ ts: Date.now(), temp_c: 5 }), { qos: 1 })).rejects.toThrow(
      /Not authorized/i,
    )
    await intruder.endAsync(true)

    const client = await connectTote(broker, tote)
    // mqtt.js rejects a SUBSCRIBE whose SUBACK refuses it (MQTT 5 §3.9.3: 0x87 Not authorized).
    for (const topic of [errors(other.id), 'rxtrace/v1/totes/+/errors', readings(tote.id), '#']) {
      await expect(client.subscribeAsync(topic, { qos: 1 }), topic).rejects.toThrow(/Not authorized/i)
    }
    for (const topic of [errors(tote.id), `rxtrace/v1/totes/${tote.id}/commands`]) {
      expect((await client.subscribeAsync(topic, { qos: 1 }))[0]?.qos, topic).toBe(1)
    }
    // What the broker accepted from it is stored; nothing was stored for the other tote.
    const ts = Date.now()
    await client.publishAsync(readings(tote.id), JSON.stringify({ ts, temp_c: 5 }), { qos: 1 })
    await waitFor(async () => (await api.service.sink.readingsForTote(tote.id, ts, ts + 1)).length === 1, 10_000, 'own reading stored')
    expect(await api.service.sink.readingsForTote(other.id, 0, Date.now() + 60_000)).toEqual([])
    await client.endAsync()
  })

  it("publishes the reason for a refused payload on the tote's errors topic, through the broker", async () => {
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    const client = await connectTote(broker, tote)
    const received: string[] = []
    client.on('message', (topic, payload) => received.push(`${topic} ${payload.toString()}`))
    await client.subscribeAsync(errors(tote.id), { qos: 1 })
    await client.publishAsync(readings(tote.id), 'warm', { qos: 1 })
    await client.publishAsync(readings(tote.id), JSON.stringify({ ts: Date.now(), temp_c: 500 }), { qos: 1 })
    await waitFor(() => received.length === 2, 10_000, 'two reasons on the errors topic')
    expect(received[0]).toMatch(new RegExp(`^${errors(tote.id)} `))
    expect(JSON.parse(received[0]!.split(' ').slice(1).join(' '))).toMatchObject({ error: 'invalid_json' })
    expect(JSON.parse(received[1]!.split(' ').slice(1).join(' ')).error).not.toBe('invalid_json')
    await client.endAsync()
  })

  it("binds readings to the tote's delivery and judges them: a reading below the hard minimum breaks the cold chain", async () => {
    const { fleetId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true, temperature_profile: 'refrigerated' })
    const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, tote_id: tote.id })
    expect(dispatched.status, dispatched.text).toBe(200)
    const client = await connectTote(broker, tote)
    // The refrigerated profile's hard minimum is 0 °C: −2 °C breaks at once.
    await client.publishAsync(readings(tote.id), JSON.stringify({ ts: Date.now(), temp_c: -2 }), { qos: 1 })
    await waitFor(
      async () => (await api.get(`/v1/events?delivery_id=${rx.delivery_id}&type=cold-chain.break`, admin)).body.data.length === 1,
      15_000,
      'the break event',
    )
    const [stored] = await api.service.sink.readingsForTote(tote.id, 0, Date.now() + 60_000)
    expect(stored?.delivery_id).toBe(rx.delivery_id)
    await client.endAsync()
  })
})
