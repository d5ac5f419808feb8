import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ReadingsRejected } from '../../src/telemetry/pipeline.js'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

const minute = 60_000

describe('readings through the ingest pipeline', () => {
  let api: TestApi
  let admin: string
  const clock = testClock()
  beforeAll(async () => {
    api = await startTestService({}, { clock })
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  /** A cold-chain delivery created and dispatched in the past, as a gateway's late upload finds it. */
  async function dispatchedColdChain(dispatchAt: string) {
    // A token for afterwards, taken now: once the clock is back to now, the test's readings go to
    // the pipeline with no await before them, so the silence check cannot judge the tote first.
    clock.set(Date.now())
    const afterwards = await api.adminToken()
    clock.set(Date.parse(dispatchAt) - minute)
    admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
    clock.set(Date.parse(dispatchAt) + 1_000)
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: fleetId,
      tote_id: tote.id,
      occurred_at: dispatchAt,
    })
    expect(res.status, res.text).toBe(200)
    clock.set(Date.now())
    admin = afterwards
    return { tote, rx }
  }

  it('attributes readings by their own timestamp and raises excursion then break', async () => {
    const start = Date.now() - 60 * minute
    const { tote, rx } = await dispatchedColdChain(new Date(start).toISOString())
    // An hour uploaded late by a gateway: 5 °C, then 12 °C for 40 minutes (grace 5 min, break after 30).
    const readings = Array.from({ length: 60 }, (_, i) => ({ ts: start + (i + 1) * minute, temp_c: i < 10 ? 5 : 12 }))
    await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(readings)))
    await api.service.monitor.flush()

    const events = (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)).body.data.map((e: { type: string }) => e.type)
    expect(events).toContain('temperature.excursion')
    expect(events.filter((t: string) => t === 'cold-chain.break')).toHaveLength(1)
    const delivery = (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body
    expect(delivery.cold_chain).toMatchObject({ state: 'BROKEN', min_c: 5, max_c: 12, break_reason: 'excursion_too_long' })
    expect(await api.service.sink.count()).toBeGreaterThanOrEqual(60)

    // The same batch again changes nothing: not the stored rows (their late flags included), not
    // the summary, not the events.
    const allTime = [0, Number.MAX_SAFE_INTEGER] as const
    const storedBefore = await api.service.sink.readingsForDelivery(rx.delivery_id, ...allTime)
    expect(storedBefore).toHaveLength(60)
    await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(readings)))
    await api.service.monitor.flush()
    expect(await api.service.sink.readingsForDelivery(rx.delivery_id, ...allTime)).toEqual(storedBefore)
    expect((await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.cold_chain).toEqual(delivery.cold_chain)
    const again = (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)).body.data.map((e: { type: string }) => e.type)
    expect(again).toEqual(events)
  })

  const day = 24 * 60 * minute
  const allTime = [0, Number.MAX_SAFE_INTEGER] as const
  const tsOf = async (deliveryId: string) => (await api.service.sink.readingsForDelivery(deliveryId, ...allTime)).map((r) => r.ts)
  const post = async (path: string, body: unknown) => {
    const res = await api.post(path, admin, body)
    expect(res.status, res.text).toBe(200)
  }
  /** A pharmacy, a fleet with a driver and a tote, made at `atMs` on the test's clock. */
  async function toteMadeAt(atMs: number) {
    clock.set(atMs)
    admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    return { pharmacy, fleetId, driverId, tote: await api.tote(admin, { pharmacy_id: pharmacy.id }) }
  }

  it("binds a reading uploaded a month late to the trip it was taken on, while the tote's later trips are cached", async () => {
    const monthAgo = Date.now() - 30 * day
    const { pharmacy, fleetId, driverId, tote } = await toteMadeAt(monthAgo - minute)
    const trip = async (startMs: number, end: boolean) => {
      clock.set(startMs)
      admin = await api.adminToken()
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
      await post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleetId, driver_id: driverId, tote_id: tote.id })
      if (end) {
        await post(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: pharmacy.id, to: driverId, signature: 'signed' })
        clock.set(startMs + 2 * 60 * minute)
        admin = await api.adminToken()
        await post(`/v1/deliveries/${rx.delivery_id}/deliver`, { verification: { method: 'otp', evidence: '482913' } })
      }
      return rx.delivery_id
    }
    const monthOld = await trip(monthAgo, true)
    const current = await trip(Date.now() - 30 * minute, false)
    clock.set(Date.now())
    admin = await api.adminToken()
    const handle = async (ts: number[]) => {
      await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(ts.map((t) => ({ ts: t, temp_c: 5 })))))
    }
    // A reading of the current trip caches the tote's bindings of the last week; then a gateway's
    // buffer from the month-old trip, alone and beside a current reading.
    const now = Date.now()
    await handle([now - minute])
    await handle([monthAgo + 30 * minute])
    await handle([monthAgo + 60 * minute, now])

    expect(await tsOf(monthOld)).toEqual([monthAgo + 30 * minute, monthAgo + 60 * minute])
    expect(await tsOf(current)).toEqual([now - minute, now])
  })

  it('takes readings off a delivery whose end is recorded late, backdated by more than a week', async () => {
    const tenDaysAgo = Date.now() - 10 * day
    const { pharmacy, fleetId, driverId, tote } = await toteMadeAt(tenDaysAgo - minute)
    // Not cold chain: its eight days without readings would break one, which holds the delivery.
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: false })
    clock.set(tenDaysAgo)
    await post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleetId, driver_id: driverId, tote_id: tote.id })
    await post(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: pharmacy.id, to: driverId, signature: 'signed' })
    clock.set(Date.now())
    admin = await api.adminToken()
    const handle = (ts: number) => api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify([{ ts, temp_c: 5 }])))
    // Stored while the delivery is open: one from its first hour (a late upload), one of two days ago.
    await handle(tenDaysAgo + 60 * minute)
    await handle(Date.now() - 2 * day)
    expect(await tsOf(rx.delivery_id)).toHaveLength(2)

    // The driver's app records the delivery now, as made eight days ago: the later reading leaves it.
    const endedAt = new Date(tenDaysAgo + 2 * day).toISOString()
    await post(`/v1/deliveries/${rx.delivery_id}/deliver`, { verification: { method: 'otp', evidence: '482913' }, occurred_at: endedAt })
    await waitFor(async () => (await tsOf(rx.delivery_id)).length === 1)
    expect(await tsOf(rx.delivery_id)).toEqual([tenDaysAgo + 60 * minute])
  })

  it('refuses a bad payload with a reason and stores nothing', async () => {
    const before = await api.service.sink.count()
    await expect(api.service.pipeline.handle('tt_x', Buffer.from('{"ts": "yesterday"'))).rejects.toBeInstanceOf(ReadingsRejected)
    await expect(api.service.pipeline.handle('tt_x', Buffer.from(JSON.stringify({ ts: Date.now(), temp_c: 500 })))).rejects.toThrow(/temp/)
    expect(await api.service.sink.count()).toBe(before)
  })

  it('rebuilds rule state after a restart without emitting an event twice', async () => {
    const start = Date.now() - 30 * minute
    const { tote, rx } = await dispatchedColdChain(new Date(start).toISOString())
    await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify([{ ts: start + minute, temp_c: -1 }])))
    await api.service.monitor.flush()
    await waitFor(
      async () => (await api.get(`/v1/events?delivery_id=${rx.delivery_id}&type=cold-chain.break`, admin)).body.data.length === 1,
    )
    // A fresh monitor (as after a restart) replays the stored readings: the break is not raised again.
    const { ColdChainMonitor, createColdChainStore } = await import('../../src/telemetry/cold-chain-monitor.js')
    const s = api.service
    const fresh = new ColdChainMonitor({
      store: createColdChainStore({ db: s.db, sink: s.sink, outbox: s.outbox }),
      clock: s.clock,
      metrics: s.metrics,
      logger: s.logger,
      windowMs: 0,
    })
    const { openColdChainBindings } = await import('../../src/telemetry/open-deliveries.js')
    await fresh.watchOpenDeliveries(await openColdChainBindings(s.db))
    await fresh.flush()
    expect(fresh.state(rx.delivery_id)?.broken?.reason).toBe('hard_limit')
    expect((await api.get(`/v1/events?delivery_id=${rx.delivery_id}&type=cold-chain.break`, admin)).body.data).toHaveLength(1)
  })
})
