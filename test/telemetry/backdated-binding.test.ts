import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import type { ReadingSink } from '../../src/timeseries/sink.js'
import { startTestService } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * SPEC §4: a reading belongs to the delivery whose binding interval contains its own ts. A driver
 * app that was offline records the dispatch later, with the occurred_at of the real dispatch;
 * the tote's readings stored meanwhile belong to the delivery from then on, so its trace starts
 * at the dispatch and their time is not a sensor gap.
 */

// 5 s of silence is a sensor gap (the tote reports every 200 ms: only a stalled test would see one).
const PROFILE = {
  name: 'quick-gap',
  min_c: 2,
  max_c: 8,
  grace_s: 0,
  max_excursion_s: 2,
  max_cumulative_s: 3_600,
  hard_min_c: null,
  hard_max_c: null,
  mkt_max_c: null,
  max_gap_s: 5,
}
const STEP_MS = 200

/** The service on its embedded stores, listening for totes. */
async function startIngest(overrides: Parameters<typeof startTestService>[1] = {}) {
  const api = await startTestService({ REORDER_WINDOW_S: '0' }, overrides)
  const { mqttPort } = await api.service.start()
  return { api, mqttPort, admin: await api.adminToken() }
}

/** A cold-chain prescription not dispatched yet, its fleet, and a tote already connected. */
async function toteBeforeDispatch({ api, mqttPort, admin }: Awaited<ReturnType<typeof startIngest>>) {
  const pharmacy = await api.pharmacy(admin)
  const { fleetId } = await api.fleetWithDriver(admin)
  const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
  const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: PROFILE })
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
    username: tote.mqtt.username,
    password: tote.mqtt.password,
    clientId: tote.id,
    reconnectPeriod: 0,
  })
  const publish = (payload: unknown) => client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify(payload), { qos: 1 })
  /** Records the dispatch now, with the given (earlier) occurred_at. */
  const dispatch = (occurredAtMs: number) =>
    api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: fleetId,
      tote_id: tote.id,
      occurred_at: new Date(occurredAtMs).toISOString(),
    })
  return { deliveryId: rx.delivery_id, client, publish, dispatch }
}

/** The SQLite sink, recording the interval of every read of one delivery's readings. */
function recordingSink() {
  const sqlite = createSqliteSink({ path: ':memory:' })
  const reads: { deliveryId: string; fromMs: number; toMs: number }[] = []
  const sink: ReadingSink = {
    ...sqlite,
    readingsForDelivery: (deliveryId, fromMs, toMs) => (
      reads.push({ deliveryId, fromMs, toMs }),
      sqlite.readingsForDelivery(deliveryId, fromMs, toMs)
    ),
    bucketed: (deliveryId, fromMs, toMs, stepMs) => (
      reads.push({ deliveryId, fromMs, toMs }),
      sqlite.bucketed(deliveryId, fromMs, toMs, stepMs)
    ),
  }
  return { sink, reads }
}

describe('a dispatch recorded after the tote had been reporting', () => {
  let ingest: Awaited<ReturnType<typeof startIngest>>
  const recording = recordingSink()
  beforeAll(async () => {
    ingest = await startIngest({ sink: recording.sink })
  })
  afterAll(() => ingest.api.stop())

  it('gives the delivery the readings stored since its occurred_at, and judges them', async () => {
    const { api, admin } = ingest
    const { deliveryId, client, publish, dispatch } = await toteBeforeDispatch(ingest)

    // The tote reports every 200 ms from the real dispatch on: 3 °C for 4 s, then 4 °C.
    const dispatchedAt = Date.now()
    let ts = dispatchedAt
    let temp = 3
    const published: Promise<unknown>[] = []
    const publishNext = () => {
      published.push(publish({ ts: (ts = Math.max(ts + 1, Date.now())), temp_c: temp }))
    }
    publishNext()
    const live = setInterval(publishNext, STEP_MS)
    try {
      // 4 s of readings (20 at 200 ms) before the dispatch is recorded.
      await waitFor(() => published.length >= 4_000 / STEP_MS, 10_000, 'four seconds of readings')
      temp = 4
      // The dispatch arrives 4 s late, with the real occurred_at.
      const dispatched = await dispatch(dispatchedAt)
      expect(dispatched.status, dispatched.text).toBe(200)
      // Judged: min 3 °C comes from the early readings, and their time is no sensor gap.
      await waitFor(
        async () => (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.cold_chain?.min_c === 3,
        5_000,
        'the summary with the early readings',
      )
      // And the readings after it: judged on the same summary, with no gap between them.
      await waitFor(
        async () => (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.cold_chain?.max_c === 4,
        5_000,
        'the summary with the later readings',
      )
    } finally {
      clearInterval(live)
      await Promise.all(published) // every PUBACK
      await client.endAsync()
    }
    const delivery = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({ state: 'OK', min_c: 3, max_c: 4, unknown_s: 0, break_reason: null })
    // Every reading since the real dispatch is in the trace, those stored before it was recorded too.
    const trace = await api.get<{ points: { n: number }[] }>(`/v1/deliveries/${deliveryId}/temperature?step=1s`, admin)
    expect(trace.body.points.reduce((n, p) => n + p.n, 0)).toBe(published.length)

    const events = await api.get<{ data: { type: string }[] }>(`/v1/events?delivery_id=${deliveryId}&limit=100`, admin)
    expect(events.body.data.map((e) => e.type)).not.toContain('cold-chain.break')
    expect(events.body.data.map((e) => e.type)).not.toContain('sensor.offline')

    // Every read of the delivery's readings (the monitor's load and recompute, the trace) starts at
    // the binding's backdated start, not at the beginning of time: on QuestDB that is what it scans.
    // A window opening an hour before the dispatch reads from the dispatch too.
    const before = await api.get(
      `/v1/deliveries/${deliveryId}/temperature?step=1s&from=${new Date(dispatchedAt - 3_600_000).toISOString()}`,
      admin,
    )
    expect(before.status, before.text).toBe(200)
    const reads = recording.reads.filter((r) => r.deliveryId === deliveryId)
    expect(reads.length).toBeGreaterThan(1)
    expect(Math.min(...reads.map((r) => r.fromMs))).toBe(dispatchedAt)
  }, 30_000)
})

describe('a binding change whose attribution fails once', () => {
  let ingest: Awaited<ReturnType<typeof startIngest>>
  let failures = 0
  beforeAll(async () => {
    const sqlite = createSqliteSink({ path: ':memory:' })
    // The store refuses the first attribution, as a briefly unavailable QuestDB would.
    const sink: ReadingSink = {
      ...sqlite,
      attribute: async (...args) => (failures++ === 0 ? Promise.reject(new Error('store unavailable')) : sqlite.attribute(...args)),
    }
    ingest = await startIngest({ sink })
  })
  afterAll(() => ingest.api.stop())

  it('is tried again, and the delivery gets its readings', async () => {
    const { api, admin } = ingest
    const { deliveryId, client, publish, dispatch } = await toteBeforeDispatch(ingest)
    const dispatchedAt = Date.now()
    const early = Array.from({ length: 5 }, (_, i) => ({ ts: dispatchedAt + (i + 1) * STEP_MS, temp_c: 3 }))
    await publish(early)
    await client.endAsync()

    const dispatched = await dispatch(dispatchedAt)
    expect(dispatched.status, dispatched.text).toBe(200)
    await waitFor(
      async () => (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.cold_chain?.min_c === 3,
      8_000,
      'the readings attributed on the second attempt',
    )
    expect(failures).toBe(2)
    const trace = await api.get<{ points: { n: number }[] }>(`/v1/deliveries/${deliveryId}/temperature?step=1s`, admin)
    expect(trace.body.points.reduce((n, p) => n + p.n, 0)).toBe(early.length)
  }, 20_000)
})
