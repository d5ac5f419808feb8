import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import type { ReadingSink } from '../../src/timeseries/sink.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * SPEC §4: a reading belongs to the delivery whose binding interval contains its own ts. A driver
 * app that was offline records the dispatch later, with the occurred_at of the real dispatch;
 * the tote's readings stored meanwhile belong to the delivery from then on, so its trace starts
 * at the dispatch and their time is not a sensor gap.
 */

// 5 s of silence is a sensor gap (the tote reports every 200 ms: only a stalled test would see one).
const PROFILE = {
  name: 'quick-gap', min_c: 2, max_c: 8, grace_s: 0, max_excursion_s: 2, max_cumulative_s: 3_600,
  hard_min_c: null, hard_max_c: null, mkt_max_c: null, max_gap_s: 5,
}
const STEP_MS = 200

describe('a dispatch recorded after the tote had been reporting', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  beforeAll(async () => {
    api = await startTestService({ REORDER_WINDOW_S: '0' })
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('gives the delivery the readings stored since its occurred_at, and judges them', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: PROFILE })
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: tote.mqtt.username, password: tote.mqtt.password, clientId: tote.id, reconnectPeriod: 0 })

    // The tote reports every 200 ms from the real dispatch on: 3 °C for 4 s, then 4 °C.
    const dispatchedAt = Date.now()
    let ts = dispatchedAt
    let temp = 3
    const published: Promise<unknown>[] = []
    const publishNext = () => {
      const payload = JSON.stringify({ ts: (ts = Math.max(ts + 1, Date.now())), temp_c: temp })
      published.push(client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, payload, { qos: 1 }))
    }
    publishNext()
    const live = setInterval(publishNext, STEP_MS)
    try {
      await new Promise((resolve) => setTimeout(resolve, 4_000))
      temp = 4
      // The dispatch arrives 4 s late, with the real occurred_at.
      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, tote_id: tote.id, occurred_at: new Date(dispatchedAt).toISOString() })
      expect(dispatched.status, dispatched.text).toBe(200)
      // Judged: min 3 °C comes from the early readings, and their time is no sensor gap.
      await waitFor(async () => (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.cold_chain?.min_c === 3, 5_000, 'the summary with the early readings')
      await new Promise((resolve) => setTimeout(resolve, 1_500)) // a monitor tick or two
    } finally {
      clearInterval(live)
      await Promise.all(published) // every PUBACK
      await client.endAsync()
    }
    const delivery = (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({ state: 'OK', min_c: 3, max_c: 4, unknown_s: 0, break_reason: null })
    // Every reading since the real dispatch is in the trace, those stored before it was recorded too.
    const trace = await api.get<{ points: { n: number }[] }>(`/v1/deliveries/${rx.delivery_id}/temperature?step=1s`, admin)
    expect(trace.body.points.reduce((n, p) => n + p.n, 0)).toBe(published.length)

    const events = await api.get<{ data: { type: string }[] }>(`/v1/events?delivery_id=${rx.delivery_id}&limit=100`, admin)
    expect(events.body.data.map((e) => e.type)).not.toContain('cold-chain.break')
    expect(events.body.data.map((e) => e.type)).not.toContain('sensor.offline')
  }, 30_000)
})

describe('a binding change whose attribution fails once', () => {
  let api: TestApi
  let admin: string
  let mqttPort: number
  let failures = 0
  beforeAll(async () => {
    const sqlite = createSqliteSink({ path: ':memory:' })
    // The store refuses the first attribution, as a briefly unavailable QuestDB would.
    const sink: ReadingSink = {
      ...sqlite,
      attribute: async (...args) => (failures++ === 0 ? Promise.reject(new Error('store unavailable')) : sqlite.attribute(...args)),
    }
    api = await startTestService({ REORDER_WINDOW_S: '0' }, { sink })
    mqttPort = (await api.service.start()).mqttPort
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it('is tried again, and the delivery gets its readings', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: PROFILE })
    const dispatchedAt = Date.now()
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, { username: tote.mqtt.username, password: tote.mqtt.password, clientId: tote.id, reconnectPeriod: 0 })
    const early = Array.from({ length: 5 }, (_, i) => ({ ts: dispatchedAt + (i + 1) * STEP_MS, temp_c: 3 }))
    await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify(early), { qos: 1 })
    await client.endAsync()

    const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, tote_id: tote.id, occurred_at: new Date(dispatchedAt).toISOString() })
    expect(dispatched.status, dispatched.text).toBe(200)
    await waitFor(async () => (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.cold_chain?.min_c === 3, 8_000, 'the readings attributed on the second attempt')
    expect(failures).toBe(2)
    const trace = await api.get<{ points: { n: number }[] }>(`/v1/deliveries/${rx.delivery_id}/temperature?step=1s`, admin)
    expect(trace.body.points.reduce((n, p) => n + p.n, 0)).toBe(early.length)
  }, 20_000)
})
