import { expect } from 'vitest'
import type { testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'

/**
 * A refrigerated delivery created and dispatched with its tote at `dispatchAtMs` (in the past),
 * as a gateway's late upload finds it. The clock is put back to the wall clock afterwards.
 */
export async function dispatchedColdChain(api: TestApi, clock: ReturnType<typeof testClock>, dispatchAtMs: number) {
  clock.set(dispatchAtMs - 60_000)
  const admin = await api.adminToken()
  const pharmacy = await api.pharmacy(admin)
  const { fleetId, driverId } = await api.fleetWithDriver(admin)
  const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
  const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
  clock.set(dispatchAtMs + 1_000)
  const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
    fleet_id: fleetId,
    driver_id: driverId,
    tote_id: tote.id,
    occurred_at: new Date(dispatchAtMs).toISOString(),
  })
  expect(res.status, res.text).toBe(200)
  clock.set(Date.now())
  return { pharmacy, tote, rx, fleetId, driverId, deliveryId: rx.delivery_id }
}

/** Feeds readings through the ingest pipeline as one gateway batch, then lets the rule engine persist. */
export async function feed(api: TestApi, toteId: string, readings: readonly { ts: number; temp_c: number; battery?: number }[]) {
  for (let i = 0; i < readings.length; i += 500) {
    // SPEC §4: a batch holds up to 500 readings
    await api.service.pipeline.handle(toteId, Buffer.from(JSON.stringify(readings.slice(i, i + 500))))
  }
  await api.service.monitor.flush()
}
