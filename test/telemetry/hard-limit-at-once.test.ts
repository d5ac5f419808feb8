// Issue 27 item 7: a reading past a hard limit breaks the cold chain at once, over real MQTT, while
// the reorder window (600 s here, on a clock that does not move) still holds every reading.
import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

describe('a freeze reading over MQTT with a long reorder window', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  const clock = testClock()
  beforeAll(async () => {
    api = await startTestService({ REORDER_WINDOW_S: '600' }, { clock })
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  async function dispatched() {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, tote_id: tote.id })
    expect(res.status, res.text).toBe(200)
    clock.advance(60_000) // the readings below come after the dispatch
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    const publish = (ts: number, temp_c: number) =>
      client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts, temp_c }), { qos: 1 })
    return { deliveryId: rx.delivery_id as string, client, publish }
  }

  const breaksOf = async (deliveryId: string) =>
    (await api.get(`/v1/events?delivery_id=${deliveryId}&type=cold-chain.break`, admin)).body.data as {
      data: { reason: string; temp_c: number; broken_at: string }
    }[]

  it('breaks without waiting for the window, once, and an older reading arriving later changes nothing', async () => {
    const { deliveryId, client, publish } = await dispatched()
    const now = clock.now()
    await publish(now - 20_000, 4.8)
    await publish(now - 10_000, -1.5) // below the refrigerated profile's hard minimum, 0 °C

    await waitFor(async () => (await breaksOf(deliveryId)).length === 1)
    const [brk] = await breaksOf(deliveryId)
    expect(brk!.data).toMatchObject({ reason: 'hard_limit', temp_c: -1.5, broken_at: new Date(now - 10_000).toISOString() })
    // The window has not elapsed (the clock has not moved): both readings are still held, unjudged.
    expect(clock.now()).toBe(now)
    expect(api.service.monitor.state(deliveryId)?.lastTs ?? null).toBeNull()
    expect((await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.cold_chain.state).toBe('BROKEN')

    // A gateway's older, colder reading: in event-time order it would have broken first. The break stands, once.
    await publish(now - 15_000, -6)
    await api.service.monitor.flush() // the window lets everything go
    const after = await breaksOf(deliveryId)
    expect(after).toHaveLength(1)
    expect(after[0]!.data).toMatchObject({ reason: 'hard_limit', temp_c: -1.5 })
    const delivery = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({ state: 'BROKEN', min_c: -6, break_reason: 'hard_limit' })
    await client.endAsync()
  })

  it('an out-of-range reading above the hard minimum still waits for the window', async () => {
    const { deliveryId, client, publish } = await dispatched()
    const now = clock.now()
    await publish(now - 10_000, 0.5)
    await api.service.monitor.flush()
    expect(await breaksOf(deliveryId)).toEqual([])
    await client.endAsync()
  })
})
