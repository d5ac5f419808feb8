import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'
import { httpClient, QUICK_PROFILE, toteClient, type Tote } from '../alarms/http.js'

/**
 * Two copies of the service on one PostgreSQL both sweep for alarms due for escalation every
 * second: each alarm nobody acknowledged is escalated by exactly one of them (docs/api.md, Alarms).
 */
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the two-copy alarm suite: ${reasons.join('; ')}`)
const schemas = postgresSchemas(url ?? 'postgres://unreachable')
const running: TestApi[] = []
const closers: (() => Promise<unknown>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close().catch(() => {})
  for (const copy of running.splice(0)) await copy.stop()
})
afterAll(() => schemas.drop())

const DELIVERIES = 6

describe.skipIf(!url)('alarm escalation with two copies on one PostgreSQL', () => {
  it('emits alarm.escalated once per alarm, whichever copy gets there first', async () => {
    const schema = await schemas.create()
    const copies = []
    for (let i = 0; i < 2; i++) {
      const api = await startTestService({}, { store: { kind: 'postgres', url: url!, schema }, sink: undefined })
      running.push(api)
      const { httpPort, mqttPort } = await api.service.start()
      copies.push({ api, http: httpClient(httpPort), mqttPort })
    }
    const [a, b] = copies as [(typeof copies)[0], (typeof copies)[0]]
    const token = await a.api.adminToken()
    // Due two seconds after it is raised: both copies' sweeps find it due at nearly the same time.
    const pharmacy = await a.api.pharmacy(token, { escalate_after_s: 2 })
    const { fleetId } = await a.api.fleetWithDriver(token)
    const deliveryIds: string[] = []
    for (let i = 0; i < DELIVERIES; i++) {
      const copy = i % 2 ? b : a
      const tote = (await copy.api.tote(token, { pharmacy_id: pharmacy.id })) as Tote
      const rx = await copy.api.prescription(token, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: QUICK_PROFILE })
      expect(
        (await copy.http('POST', `/v1/deliveries/${rx.delivery_id}/dispatch`, token, { fleet_id: fleetId, tote_id: tote.id })).status,
      ).toBe(200)
      const sensor = await toteClient(copy.mqttPort, tote)
      closers.push(sensor.end)
      await sensor.send(13)
      await sensor.send(13)
      deliveryIds.push(rx.delivery_id)
    }
    const escalated = async (deliveryId: string) => {
      const res = await a.http<{ data: { type: string }[] }>('GET', `/v1/events?delivery_id=${deliveryId}&limit=100`, token)
      return res.body.data.filter((e) => e.type === 'alarm.escalated').length
    }
    for (const id of deliveryIds) await vi.waitFor(async () => expect(await escalated(id)).toBe(1), { timeout: 20_000, interval: 100 })
    // A few more sweeps of both copies: still one each.
    await new Promise((resolve) => setTimeout(resolve, 3_000))
    for (const id of deliveryIds) expect(await escalated(id)).toBe(1)
    const alarms = await b.http<{ data: { escalated_at: string | null }[] }>('GET', `/v1/alarms?limit=100`, token)
    expect(alarms.body.data).toHaveLength(DELIVERIES)
    expect(alarms.body.data.every((al) => al.escalated_at !== null)).toBe(true)
  }, 90_000)
})
