import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { dispatchedColdChain, feed } from '../trace/cold-chain-delivery.js'

const MINUTE = 60_000

/**
 * A dispatcher reads "broken 50 min ago" or "failed 20 min ago" on the fleet dashboard: `since`
 * is when the exception began, not when the delivery last changed (a pickup after a break, or a
 * driver's app syncing a failed attempt late, used to make it look newer than it is).
 */
describe('open exceptions on the fleet dashboard', () => {
  let api: TestApi
  let admin: string
  const clock = testClock(Date.now() - 2 * 60 * MINUTE)
  afterAll(() => api?.stop())
  beforeAll(async () => {
    api = await startTestService({}, { clock })
  })

  it('dates a break by when it broke and a failed attempt by when it happened', async () => {
    const dispatchedAt = Date.now() - 60 * MINUTE
    const broken = await dispatchedColdChain(api, clock, dispatchedAt)
    admin = await api.adminToken() // the clock is back at now
    // In range, then a freeze at minute 10: a hard limit, so broken then.
    await feed(api, broken.tote.id, [
      { ts: dispatchedAt + 5 * MINUTE, temp_c: 5 },
      { ts: dispatchedAt + 10 * MINUTE, temp_c: -1 },
    ])
    const brokenAt = new Date(dispatchedAt + 10 * MINUTE).toISOString()
    expect((await api.get(`/v1/deliveries/${broken.deliveryId}`, admin)).body.cold_chain).toMatchObject({
      state: 'BROKEN',
      broken_at: brokenAt,
    })
    // The driver picks it up now: the delivery changes, the break does not.
    const pickup = await api.post(`/v1/deliveries/${broken.deliveryId}/pickup`, admin, {
      from: broken.pharmacy.id,
      to: broken.driverId,
      signature: 'sig',
    })
    expect(pickup.status, pickup.text).toBe(200)

    // Picked up 45 minutes ago; a failed attempt 20 minutes ago, synced by the driver's app only now.
    clock.set(Date.now() - 45 * MINUTE)
    const earlier = await api.adminToken()
    const rx = await api.prescription(earlier, { pharmacy_id: broken.pharmacy.id, cold_chain: false })
    for (const [action, body] of [
      ['dispatch', { fleet_id: broken.fleetId, driver_id: broken.driverId }],
      ['pickup', { from: broken.pharmacy.id, to: broken.driverId, signature: 'sig' }],
    ] as const) {
      const res = await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, earlier, body)
      expect(res.status, res.text).toBe(200)
    }
    clock.set(Date.now())
    admin = await api.adminToken()
    const failedAt = new Date(Date.now() - 20 * MINUTE).toISOString()
    const fail = await api.post(`/v1/deliveries/${rx.delivery_id}/fail`, admin, {
      reason: 'patient_unavailable',
      note: 'nobody home',
      occurred_at: failedAt,
    })
    expect(fail.status, fail.text).toBe(200)

    const dashboard = await api.get(`/v1/fleets/${broken.fleetId}/dashboard`, admin)
    expect(dashboard.status, dashboard.text).toBe(200)
    const names = { driver_name: 'Dana Driver', pharmacy_name: 'Main Street Pharmacy', items: [] }
    expect(dashboard.body.open_exceptions.items).toEqual([
      { delivery_id: rx.delivery_id, kind: 'failed', since: failedAt, status: 'FAILED', ...names },
      { delivery_id: broken.deliveryId, kind: 'cold_chain_break', since: brokenAt, status: 'PICKED_UP', ...names },
    ])
  })
})
