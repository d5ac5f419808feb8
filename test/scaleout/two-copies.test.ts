import mqtt from 'mqtt'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { startReceiver, type Receiver } from '../webhooks/receiver.js'

/**
 * Two copies of the service on one PostgreSQL (docs/deployment.md, Several copies on one
 * PostgreSQL), each with its own embedded broker, in this process: readings in the shared
 * `readings` table, one evaluator per delivery, webhooks claimed across copies.
 */
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the two-copy suites: ${reasons.join('; ')}`)

const schemas = postgresSchemas(url ?? 'postgres://unreachable')
const running: TestApi[] = []
const clients: mqtt.MqttClient[] = []
afterEach(async () => {
  for (const client of clients.splice(0)) client.end(true)
  for (const copy of running.splice(0)) await copy.stop()
})
afterAll(() => schemas.drop())

/** Two copies on a fresh schema, started (brokers and dispatchers running); the first has made the store. */
async function twoCopies(env: Record<string, string> = {}) {
  const schema = await schemas.create()
  const copies: { api: TestApi; mqttPort: number }[] = []
  for (let i = 0; i < 2; i++) {
    // sink: undefined — the service's own choice on PostgreSQL, the shared readings table.
    const api = await startTestService(env, { store: { kind: 'postgres', url: url!, schema }, sink: undefined })
    running.push(api)
    copies.push({ api, mqttPort: (await api.service.start()).mqttPort })
  }
  return copies
}

async function connect(mqttPort: number, tote: { id: string; mqtt: { username: string; password: string } }) {
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
    username: tote.mqtt.username,
    password: tote.mqtt.password,
    clientId: `${tote.id}-${mqttPort}`,
    reconnectPeriod: 0,
  })
  clients.push(client)
  return client
}

const publish = (client: mqtt.MqttClient, toteId: string, reading: object) =>
  client.publishAsync(`rxtrace/v1/totes/${toteId}/readings`, JSON.stringify(reading), { qos: 1 })

/** A cold-chain prescription dispatched with a new tote through `api`, bound from now. */
async function dispatched(api: TestApi, admin: string, pharmacyId: string, fleetId: string) {
  const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
  const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true, temperature_profile: 'refrigerated' })
  const at = Date.now()
  const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
    fleet_id: fleetId,
    tote_id: tote.id,
    occurred_at: new Date(at).toISOString(),
  })
  if (res.status !== 200) throw new Error(`dispatch: ${res.status} ${res.text}`)
  return { tote, deliveryId: rx.delivery_id, at }
}

const eventsOf = async (api: TestApi, deliveryId: string) =>
  await api.service.db.selectFrom('events').select(['type', 'dedupe_key']).where('delivery_id', '=', deliveryId).orderBy('seq').execute()

describe.skipIf(!url)('two copies on one PostgreSQL', () => {
  it('shows every copy’s readings through either copy, and applies a binding made through one copy to readings arriving at the other at once', async () => {
    const [a, b] = await twoCopies()
    const admin = await a!.api.adminToken()
    const pharmacy = await a!.api.pharmacy(admin)
    const { fleetId } = await a!.api.fleetWithDriver(admin)
    const tote = await a!.api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await a!.api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
    const atB = await connect(b!.mqttPort, tote)
    const atA = await connect(a!.mqttPort, tote)
    // Copy B has just read (and cached) the tote's bindings: none yet.
    await publish(atB, tote.id, { ts: Date.now() - 1_000, temp_c: 5, seq: 1 })

    const dispatchedAt = Date.now()
    const res = await a!.api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: fleetId,
      tote_id: tote.id,
      occurred_at: new Date(dispatchedAt).toISOString(),
    })
    expect(res.status).toBe(200)
    // Copy A has applied the binding to the stored readings (its monitor watches the delivery
    // once that is done): a reading B stores from now on is B's to bind. Before, B bound it with
    // its cached intervals (up to 2 s old) and it stayed off the delivery's trace.
    await vi.waitFor(
      () => expect(a!.api.service.monitor.state(rx.delivery_id) ?? a!.api.service.monitor.isRemote(rx.delivery_id)).toBeTruthy(),
      { timeout: 30_000, interval: 5 },
    )
    await publish(atB, tote.id, { ts: dispatchedAt + 1, temp_c: 5, seq: 2 }) // to the copy that did not make the binding
    await publish(atA, tote.id, { ts: dispatchedAt + 2, temp_c: 5, seq: 3 })

    // Both copies read both readings of the delivery from the shared table; the unbound one stays unbound.
    for (const copy of [a!, b!]) {
      await vi.waitFor(
        async () =>
          expect((await copy.api.service.sink.readingsForDelivery(rx.delivery_id, 0, Infinity)).map((r) => r.seq)).toEqual([2, 3]),
        { timeout: 30_000, interval: 50 },
      )
    }
    expect((await b!.api.service.sink.readingsForTote(tote.id, 0, Infinity)).map((r) => [r.seq, r.delivery_id])).toEqual([
      [1, null],
      [2, rx.delivery_id],
      [3, rx.delivery_id],
    ])
  }, 90_000)

  it('evaluates each delivery in one copy, whichever copy its readings reach, and emits each break once', async () => {
    const [a, b] = await twoCopies()
    const admin = await a!.api.adminToken()
    const pharmacy = await a!.api.pharmacy(admin)
    const { fleetId } = await a!.api.fleetWithDriver(admin)
    const deliveries = [
      await dispatched(a!.api, admin, pharmacy.id, fleetId),
      await dispatched(b!.api, admin, pharmacy.id, fleetId),
      await dispatched(a!.api, admin, pharmacy.id, fleetId),
    ]

    for (const { tote, at } of deliveries) {
      const [toA, toB] = [await connect(a!.mqttPort, tote), await connect(b!.mqttPort, tote)]
      // Readings alternate between the copies; the fourth is below the hard minimum: a break.
      for (let i = 1; i <= 6; i++) await publish(i % 2 ? toA : toB, tote.id, { ts: at + i * 1_000, temp_c: i === 4 ? -2 : 5, seq: i })
    }
    for (const { deliveryId } of deliveries) {
      await vi.waitFor(async () => expect((await eventsOf(a!.api, deliveryId)).map((e) => e.type)).toContain('cold-chain.break'), {
        timeout: 30_000,
        interval: 100,
      })
    }
    // Each delivery has one evaluator, and every reading reached it: both copies' readings are in its summary.
    const leases = (await a!.api.service.db
      .selectFrom('rule_leases' as never)
      .selectAll()
      .execute()) as unknown as { delivery_id: string; holder: string }[]
    expect(leases.map((l) => l.delivery_id).sort()).toEqual(deliveries.map((d) => d.deliveryId).sort())
    await Promise.all([a!.api.service.monitor.flush(), b!.api.service.monitor.flush()])
    for (const { deliveryId } of deliveries) {
      const evaluator = [a!, b!].find((c) => c.api.service.monitor.state(deliveryId) !== undefined)!
      expect([a!, b!].filter((c) => c.api.service.monitor.state(deliveryId) !== undefined)).toHaveLength(1)
      expect(evaluator.api.service.monitor.state(deliveryId)!.lastTs).toBe(deliveries.find((d) => d.deliveryId === deliveryId)!.at + 6_000)
      const breaks = (await eventsOf(a!.api, deliveryId)).filter((e) => e.type === 'cold-chain.break')
      expect(breaks).toHaveLength(1)
    }
  }, 90_000)

  it('delivers every webhook event of a burst of 50 prescriptions made through both copies, none more than twice', async () => {
    const [a, b] = await twoCopies()
    const receiver: Receiver = await startReceiver()
    try {
      const admin = await a!.api.adminToken()
      const pharmacy = await a!.api.pharmacy(admin)
      const endpoint = await a!.api.post('/v1/webhooks', admin, { url: `${receiver.url}/hooks`, events: ['*'], pharmacy_id: pharmacy.id })
      expect(endpoint.status).toBe(201)
      await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? a! : b!).api.prescription(admin, { pharmacy_id: pharmacy.id })))

      const events = await a!.api.service.db.selectFrom('events').select('id').where('pharmacy_id', '=', pharmacy.id).execute()
      expect(events.length).toBeGreaterThanOrEqual(50)
      const deliveries = () => {
        const count = new Map<string, number>()
        for (const r of receiver.requests) count.set(String(r.headers['webhook-id']), (count.get(String(r.headers['webhook-id'])) ?? 0) + 1)
        return count
      }
      await vi.waitFor(() => expect(deliveries().size).toBe(events.length), { timeout: 60_000, interval: 50 })
      const count = deliveries()
      for (const { id } of events) expect(count.get(id)).toBeGreaterThanOrEqual(1)
      expect(Math.max(...count.values())).toBeLessThanOrEqual(2)
      // Every request sent is recorded as an attempt (recording follows the answer, in group commits).
      const attempts = async () => (await a!.api.service.db.selectFrom('webhook_attempts').select('id').execute()).length
      await vi.waitFor(async () => expect(await attempts()).toBe(receiver.requests.length), { timeout: 30_000, interval: 50 })
    } finally {
      await receiver.close()
    }
  }, 120_000)
})
