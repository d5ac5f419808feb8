import mqtt, { type MqttClient } from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * Cold-chain items judged by their products' stability budgets, live: readings published by a tote
 * over MQTT to the embedded broker, the ledger charged in the same pass as the rules, its events
 * through the outbox, and the delivery showing the ledger.
 */

const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  // Two minutes allowed between 8 and 25 °C: a short delivery exhausts it.
  budgets: [
    { min_c: 8, max_c: 25, allowed_s: 120 },
    { min_c: 0, max_c: 2, allowed_s: 3600 },
  ],
  freeze_thaw_max: 0,
  source: 'test data',
}
const NDC = '0002-8215-01'

describe('stability budgets judged from MQTT readings', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  let pharmacyId: string
  let carrier: { fleetId: string; driverId: string }
  let productId: string
  const clients: MqttClient[] = []

  beforeAll(async () => {
    api = await startTestService()
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    carrier = await api.fleetWithDriver(admin)
    const product = await api.post('/v1/products', admin, { ndc: NDC, name: 'Insulin', pharmacy_id: pharmacyId, stability: STABILITY })
    expect(product.status, product.text).toBe(201)
    productId = product.body.id
  })
  afterAll(async () => {
    for (const c of clients) await c.endAsync().catch(() => undefined)
    await api.stop()
  })

  /** A cold-chain delivery of one product item and one item without a product, dispatched with its own tote. */
  async function dispatched() {
    const rx = await api.prescription(admin, {
      pharmacy_id: pharmacyId,
      cold_chain: true,
      items: [
        { description: 'Insulin lispro 10 mL', ndc: NDC, quantity: 2 },
        { description: 'Pen needles', quantity: 1 },
      ],
    })
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    const dispatch = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: carrier.fleetId,
      driver_id: carrier.driverId,
      tote_id: tote.id,
    })
    expect(dispatch.status, dispatch.text).toBe(200)
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    clients.push(client)
    const publish = (readings: { ts: number; temp_c: number }[]) =>
      client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify(readings), { qos: 1 })
    return { deliveryId: rx.delivery_id, publish }
  }

  /** 5 °C, then 12 °C for 130 s: past 96 s (a fifth left) budget-low, past 120 s exhausted. */
  function warmRide(): { ts: number; temp_c: number }[] {
    const t0 = Date.now() + 1_000
    return [
      { ts: t0, temp_c: 5 },
      { ts: t0 + 10_000, temp_c: 12 },
      { ts: t0 + 50_000, temp_c: 12 },
      { ts: t0 + 100_000, temp_c: 12 },
      { ts: t0 + 140_000, temp_c: 5 },
      { ts: t0 + 150_000, temp_c: 5 },
    ]
  }

  async function settled(deliveryId: string) {
    await api.service.monitor.flush()
    return (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
  }
  const eventsOf = async (deliveryId: string) =>
    (await api.get(`/v1/events?delivery_id=${deliveryId}&limit=100`, admin)).body.data as { type: string; data: any }[]

  it('shows the ledger on the delivery, warns at 20 %, and breaks the cold chain when an item is exhausted', async () => {
    const { deliveryId, publish } = await dispatched()
    const before = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
    expect(before.stability).toMatchObject({ remaining_fraction: 1, legs: [deliveryId] })
    expect(before.stability.items).toHaveLength(1) // the item without a product keeps the profile's rules alone

    await publish(warmRide())
    const delivery = await settled(deliveryId)
    const item = delivery.stability.items[0]
    expect(item).toMatchObject({ ndc: '00002-8215-01', product_id: productId, version: 1, verdict: 'exhausted' })
    expect(item.exhausted_reason).toBe('band_budget')
    expect(item.bands[0]).toMatchObject({ allowed_s: 120, consumed_s: 130, remaining_s: 0 })
    expect(delivery.stability.remaining_fraction).toBe(0)
    expect(delivery.cold_chain.state).toBe('BROKEN')
    expect(delivery.cold_chain.break_reason).toBe('stability_exhausted')

    const events = await eventsOf(deliveryId)
    const low = events.filter((e) => e.type === 'stability.budget-low')
    expect(low).toHaveLength(1)
    expect(low[0]!.data).toMatchObject({ ndc: '00002-8215-01', product_id: productId, version: 1, band: { min_c: 8, max_c: 25 } })
    const breaks = events.filter((e) => e.type === 'cold-chain.break')
    expect(breaks).toHaveLength(1)
    expect(breaks[0]!.data).toMatchObject({ reason: 'stability_exhausted', item: { product_id: productId, reason: 'band_budget' } })
  })

  it('recomputes late readings to the same ledger as in-order arrival', async () => {
    const inOrder = await dispatched()
    const shuffled = await dispatched()
    const ride = warmRide()
    await inOrder.publish(ride)
    // Newest first, one at a time: every later one arrives late and the ledger is recomputed.
    for (const reading of [...ride].reverse()) await shuffled.publish([reading])
    const a = await settled(inOrder.deliveryId)
    await expect.poll(async () => (await settled(shuffled.deliveryId)).stability.items, { timeout: 20_000 }).toEqual(a.stability.items)
  })

  it('never rewrites a delivery already judged when the product changes', async () => {
    const { deliveryId, publish } = await dispatched()
    const changed = await api.request('PUT', `/v1/products/${productId}/stability`, {
      token: admin,
      body: { stability: { ...STABILITY, budgets: [{ min_c: 8, max_c: 25, allowed_s: 86_400 }] } },
    })
    expect(changed.status, changed.text).toBe(201)
    await publish(warmRide())
    const delivery = await settled(deliveryId)
    expect(delivery.stability.items[0]).toMatchObject({ version: 1, verdict: 'exhausted' })

    // A prescription created after the change is judged by the new version.
    const later = await dispatched()
    expect((await api.get(`/v1/deliveries/${later.deliveryId}`, admin)).body.stability.items[0].version).toBe(changed.body.version)
  })
})
