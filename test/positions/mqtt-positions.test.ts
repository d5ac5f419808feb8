import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { MINUTE, SECOND } from '../helpers/clock.js'
import { waitFor } from '../helpers/wait.js'
import { eventsOf, lastMileWorld, northOfDoor } from './fixtures.js'

/**
 * A driver's app over MQTT on the embedded broker (docs/fleet.md, Positions over MQTT): it
 * connects as the driver with its own access token, publishes only to its own topic (like a
 * tote), and learns on its errors topic why a payload was refused.
 */
describe("a driver's positions over MQTT", () => {
  let api: TestApi
  let mqttPort: number
  let world: Awaited<ReturnType<typeof lastMileWorld>>
  const open: mqtt.MqttClient[] = []
  const topic = (driverId: string) => `rxtrace/v1/drivers/${driverId}/location`
  const position = (metres: number, offsetMs = 0) => ({
    ...northOfDoor(metres),
    accuracy_m: 6,
    at: new Date(Date.now() + offsetMs).toISOString(),
  })
  const connect = async (driverId: string, token: string, clientId = driverId) => {
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: driverId,
      password: token,
      clientId,
      reconnectPeriod: 0,
    })
    open.push(client)
    return client
  }

  beforeAll(async () => {
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10' })
    mqttPort = (await api.service.start()).mqttPort
    world = await lastMileWorld(api, 60 * MINUTE)
  })
  afterAll(async () => {
    await Promise.all(open.map((c) => c.endAsync(true).catch(() => {})))
    await api.stop()
  })

  it('stores a QoS 1 position before the PUBACK and moves the ETA; refusals come back on the errors topic', async () => {
    const { fleet, driverToken } = world
    const { deliveryId } = await world.outFor(fleet.driverId)
    const client = await connect(fleet.driverId, driverToken)
    const errors: Record<string, unknown>[] = []
    client.on('message', (_t, payload) => errors.push(JSON.parse(payload.toString())))
    const granted = await client.subscribeAsync(`rxtrace/v1/drivers/${fleet.driverId}/errors`, { qos: 1 })
    expect(granted[0]!.qos).toBe(1)

    await client.publishAsync(topic(fleet.driverId), JSON.stringify(position(6_000)), { qos: 1 })
    const stored = await api.get(`/v1/deliveries/${deliveryId}/locations`, world.admin)
    expect(stored.body.data).toHaveLength(1) // the PUBACK came after the commit
    expect((await eventsOf(api, deliveryId, ['delivery.eta-changed'])).map((e) => e.data.distance_m)).toEqual([6_000])
    // A batch of positions (an app that was offline) in one message.
    await client.publishAsync(topic(fleet.driverId), JSON.stringify([position(5_900, -2 * SECOND), position(5_800, -SECOND)]), { qos: 1 })
    expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, world.admin)).body.data).toHaveLength(3)

    const bad: [string | Buffer, string][] = [
      ['not json', 'invalid_json'],
      // Refused as a tote's payload is: not UTF-8, nested deeper than 32, a NUL.
      [Buffer.concat([Buffer.from('{"note":"'), Buffer.from([0xff]), Buffer.from('"}')]), 'invalid_json'],
      [`${'['.repeat(40)}${']'.repeat(40)}`, 'invalid_json'],
      [`{"lat":1,"lon":1,"at":"x","note":"\\u0000"}`, 'invalid_json'],
      [JSON.stringify({ ...position(1_000), lat: 123 }), 'invalid_position'],
      [JSON.stringify(position(1_000, 5 * MINUTE)), 'position_in_future'],
      [JSON.stringify(Array.from({ length: 101 }, () => position(1_000))), 'too_many_positions'],
    ]
    for (const [payload] of bad) await client.publishAsync(topic(fleet.driverId), payload, { qos: 1 })
    await waitFor(() => errors.length === bad.length, 5_000, 'the refusals')
    expect(errors.map((e) => e.error)).toEqual(bad.map(([, code]) => code))
    expect(errors.slice(1, 4).map((e) => e.reason)).toEqual([
      expect.stringMatching(/UTF-8/),
      expect.stringMatching(/deeper than 32/),
      expect.stringMatching(/\/note: .*U\+0000/),
    ])
    expect(errors[4]!.reason).toContain('/lat must be a number from -90 to 90')
    expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, world.admin)).body.data).toHaveLength(3)
    expect(client.connected).toBe(true) // a refused payload leaves the connection open
  })

  it('refuses a driver with nothing in progress on its errors topic', async () => {
    const client = await connect(world.fleet.driver2Id, world.secondDriverToken)
    const errors: Record<string, unknown>[] = []
    client.on('message', (_t, payload) => errors.push(JSON.parse(payload.toString())))
    await client.subscribeAsync(`rxtrace/v1/drivers/${world.fleet.driver2Id}/errors`, { qos: 1 })
    await client.publishAsync(topic(world.fleet.driver2Id), JSON.stringify(position(1_000)), { qos: 1 })
    await waitFor(() => errors.length === 1)
    expect(errors[0]).toMatchObject({ error: 'not_on_delivery' })
  })

  it("refuses another driver's or another fleet's credentials at CONNECT, and a token that is not a driver's", async () => {
    const { fleet, other, driverToken, otherDriverToken, admin } = world
    const refused = (driverId: string, token: string) =>
      expect(
        mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: driverId, password: token, clientId: driverId, reconnectPeriod: 0 }),
      ).rejects.toThrow(/Bad username or password/i)
    await refused(other.driverId, driverToken) // our driver's token for another fleet's driver
    await refused(fleet.driverId, otherDriverToken) // another fleet's driver's token for ours
    await refused(fleet.driver2Id, driverToken) // a colleague's
    await refused(fleet.driverId, admin) // a client token, not the driver's own
    await refused(fleet.driverId, 'not a token')
    // A client id that is not the driver's own is refused too (code 2), as for totes.
    await expect(
      mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
        username: fleet.driverId,
        password: driverToken,
        clientId: other.driverId,
        reconnectPeriod: 0,
      }),
    ).rejects.toThrow(/Identifier rejected/i)
  })

  it("closes the connection of a driver that publishes to another driver's topic, and refuses subscriptions to others' topics", async () => {
    const { fleet, other, driverToken } = world
    const { deliveryId } = await world.outFor(other.driverId)
    const client = await connect(fleet.driverId, driverToken, `${fleet.driverId}-acl`)
    // mqtt.js turns return code 0x80 into a rejection carrying the SUBACK
    for (const refused of [
      `rxtrace/v1/drivers/${other.driverId}/errors`,
      `rxtrace/v1/drivers/${other.driverId}/location`,
      'rxtrace/v1/drivers/+/location',
      'rxtrace/v1/totes/#',
    ])
      await expect(client.subscribeAsync(refused, { qos: 1 })).rejects.toMatchObject({ packet: { granted: [128] } })
    expect(client.connected).toBe(true)
    const closed = new Promise<void>((resolve) => client.once('close', () => resolve()))
    client.publish(topic(other.driverId), JSON.stringify(position(100)), { qos: 1 })
    await closed
    expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, world.admin)).body.data).toEqual([])
    expect(await eventsOf(api, deliveryId, ['delivery.arriving'])).toEqual([])
  })
})
