import mqtt, { type MqttClient } from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, testClock } from '../helpers/clock.js'
import { publishPaced } from '../helpers/paced-readings.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * Release by stability budget: under a pharmacy's `auto_within_budget` policy an excursion every item
 * survives is not a break and the delivered record says the system released it; hard limits still
 * break; a manual pharmacy, or an item without a product, goes to a person as before. Readings come
 * from a tote over MQTT to the embedded broker.
 */

const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [{ min_c: 8, max_c: 25, allowed_s: 4 * 3600 }],
  freeze_thaw_max: 0,
  source: 'test data',
}
const NDC = '00002-8215-01'
const START = Date.parse('2026-11-20T15:00:00.000Z')
const SIGNATURE = 'data:image/png;base64,AAAA'

describe('release by stability budget', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  let carrier: { fleetId: string; driverId: string }
  const clock = testClock(START)
  const clients: MqttClient[] = []

  beforeAll(async () => {
    api = await startTestService({ TOKEN_TTL_S: '86400' }, { clock })
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
    carrier = await api.fleetWithDriver(admin)
    const product = await api.post('/v1/products', admin, { ndc: NDC, name: 'Insulin', pharmacy_id: null, stability: STABILITY })
    expect(product.status, product.text).toBe(201)
  })
  afterAll(async () => {
    for (const c of clients) await c.endAsync().catch(() => undefined)
    await api.stop()
  })

  /**
   * A refrigerated delivery picked up, with 40 minutes at 12 °C: longer than the profile's 30-minute
   * excursion limit, well within the product's four hours. Then `extra` readings.
   */
  async function warmDelivery(pharmacy: Record<string, unknown>, items: Record<string, unknown>[], extra: number[] = []) {
    const pharmacyId = (await api.pharmacy(admin, pharmacy)).id
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true, items })
    const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
    const id = rx.delivery_id
    const dispatchedAt = clock.now()
    expect(
      (await api.post(`/v1/deliveries/${id}/dispatch`, admin, { fleet_id: carrier.fleetId, driver_id: carrier.driverId, tote_id: tote.id }))
        .status,
    ).toBe(200)
    expect(
      (await api.post(`/v1/deliveries/${id}/pickup`, admin, { from: pharmacyId, to: carrier.driverId, signature: SIGNATURE })).status,
    ).toBe(200)
    const temps = [5, ...Array.from({ length: 41 }, () => 12), 5, ...extra]
    const readings = temps.map((temp_c, i) => ({ ts: dispatchedAt + 1_000 + i * MINUTE, temp_c }))
    const end = clock.now() + temps.length * MINUTE + MINUTE
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    clients.push(client)
    await publishPaced(client, tote.id, readings, clock)
    clock.set(end)
    await api.service.monitor.flush()
    const deliver = () => api.post(`/v1/deliveries/${id}/deliver`, admin, { verification: { method: 'otp', evidence: '123456' } })
    return { id, deliver, delivery: async () => (await api.get(`/v1/deliveries/${id}`, admin)).body }
  }

  it('gives new pharmacies auto_within_budget, and lets a pharmacy choose manual', async () => {
    expect((await api.pharmacy(admin)) as unknown).toMatchObject({ release_policy: 'auto_within_budget' })
    expect((await api.pharmacy(admin, { release_policy: 'manual' })) as unknown).toMatchObject({ release_policy: 'manual' })
  })

  it('keeps pharmacies registered before the policy existed on manual (the column’s default)', async () => {
    await api.service.db
      .insertInto('pharmacies')
      .values({
        id: 'ph_01before0000000000000000000',
        name: 'Old Town Pharmacy',
        ncpdp_id: null,
        npi: null,
        address: JSON.stringify({ line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' }),
        timezone: 'America/Chicago',
        location: null,
        writeback: null,
        created_at: new Date(START).toISOString(),
      })
      .execute()
    expect((await api.get('/v1/pharmacies/ph_01before0000000000000000000', admin)).body.release_policy).toBe('manual')
  })

  it('does not break an excursion every item survives, and records the system’s release when delivered', async () => {
    const d = await warmDelivery({}, [{ description: 'Insulin', ndc: NDC, quantity: 1 }])
    const before = await d.delivery()
    expect(before.cold_chain.break_reason).toBeNull()
    expect(before.stability.items[0]).toMatchObject({ verdict: 'within' })
    const delivered = await d.deliver()
    expect(delivered.status, delivered.text).toBe(200)
    expect(delivered.body.release).toMatchObject({
      by: 'system',
      rule: 'stability_budget',
      versions: [{ ndc: NDC, version: 1 }],
      remaining_fraction: before.stability.remaining_fraction,
    })
    expect((await d.delivery()).release).toEqual(delivered.body.release)
  })

  it('still breaks on a hard limit', async () => {
    const d = await warmDelivery({}, [{ description: 'Insulin', ndc: NDC, quantity: 1 }], [-1])
    expect((await d.delivery()).cold_chain.break_reason).toBe('hard_limit')
    expect((await d.deliver()).status).toBe(409)
  })

  it('sends the same excursion to a person under manual, or when an item has no product', async () => {
    const manual = await warmDelivery({ release_policy: 'manual' }, [{ description: 'Insulin', ndc: NDC, quantity: 1 }])
    expect((await manual.delivery()).cold_chain.break_reason).toBe('excursion_too_long')
    expect((await manual.deliver()).body.code).toBe('cold_chain_hold')

    const mixed = await warmDelivery({}, [
      { description: 'Insulin', ndc: NDC, quantity: 1 },
      { description: 'Pen needles', quantity: 1 },
    ])
    expect((await mixed.delivery()).cold_chain.break_reason).toBe('excursion_too_long')
  })
})
