import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Reply, TestApi } from '../../helpers/service.js'
import type { StoreUnderTest } from '../../helpers/stores.js'

const count = (answers: Reply[], status: number) => answers.filter((a) => a.status === status).length

/** Concurrent actions on one delivery (SPEC §3): one winner, an intact chain, the same on every store. */
export function describeConcurrency(store: StoreUnderTest) {
  describe(`concurrent delivery actions on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let fleets: Awaited<ReturnType<TestApi['fleetWithDriver']>>[]

    beforeAll(async () => {
      api = await store.start()
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      fleets = [await api.fleetWithDriver(admin), await api.fleetWithDriver(admin)]
    })
    afterAll(() => api.stop())

    const act = (id: string, action: string, body: unknown) => api.post(`/v1/deliveries/${id}/${action}`, admin, body)
    const verify = async (id: string) => (await api.get(`/v1/deliveries/${id}/custody/verify`, admin)).body

    it('50 conflicting dispatches of a queued delivery (to two fleets): exactly one wins, 49 get 409, the chain holds 2 events', async () => {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) => act(rx.delivery_id, 'dispatch', { fleet_id: fleets[i % 2]!.fleetId })),
      )
      expect(count(answers, 200)).toBe(1)
      expect(count(answers, 409)).toBe(49)
      for (const loser of answers.filter((a) => a.status === 409))
        expect(loser.body).toMatchObject({ code: 'invalid_transition', allowed_actions: ['pickup', 'cancel'] })
      const winner = answers.find((a) => a.status === 200)!.body
      const delivery = (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body
      expect(delivery).toMatchObject({ status: 'DISPATCHED', fleet_id: winner.fleet_id })
      expect(delivery.custody.map((e: { type: string }) => e.type)).toEqual(['created', 'dispatched'])
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 2 })
      // On PostgreSQL the feed lists an event once older transactions on the server have ended.
      const dispatchedEvents = async () =>
        (await api.get(`/v1/events?delivery_id=${rx.delivery_id}&type=delivery.dispatched`, admin)).body.data as unknown[]
      await expect.poll(dispatchedEvents, { timeout: 15_000 }).toHaveLength(1)
    })

    it('25 deliver + 25 fail on a picked-up delivery: exactly one wins, the rest 409', async () => {
      const { fleetId, driverId } = fleets[0]!
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      expect((await act(rx.delivery_id, 'dispatch', { fleet_id: fleetId, driver_id: driverId })).status).toBe(200)
      expect((await act(rx.delivery_id, 'pickup', { from: pharmacyId, to: driverId, signature: 'sig' })).status).toBe(200)
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          i % 2
            ? act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: String(i) } })
            : act(rx.delivery_id, 'fail', { reason: 'patient_unavailable', note: `attempt ${i}` }),
        ),
      )
      expect(count(answers, 200)).toBe(1)
      expect(count(answers, 409)).toBe(49)
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 4 })
    })

    it('25 cancel + 25 dispatch on a queued delivery: dispatch-then-cancel is legal, so it ends CANCELLED with one event per winner', async () => {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      const answers = await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          i % 2
            ? act(rx.delivery_id, 'cancel', { reason: `cancel ${i}` })
            : act(rx.delivery_id, 'dispatch', { fleet_id: fleets[0]!.fleetId }),
        ),
      )
      const winners = answers.filter((a) => a.status === 200)
      expect(count(answers, 409)).toBe(50 - winners.length)
      expect(winners.filter((a) => a.body.status === 'CANCELLED')).toHaveLength(1)
      expect(winners.filter((a) => a.body.status === 'DISPATCHED').length).toBeLessThanOrEqual(1)
      const delivery = (await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body
      expect(delivery.status).toBe('CANCELLED')
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 1 + winners.length })
    })

    it('one tote, dispatched concurrently with 10 deliveries: exactly one gets it', async () => {
      const tote = await api.tote(admin, { pharmacy_id: pharmacyId })
      const rxs = await Promise.all(
        Array.from({ length: 10 }, () => api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true })),
      )
      const answers = await Promise.all(
        rxs.map((rx) => act(rx.delivery_id, 'dispatch', { fleet_id: fleets[0]!.fleetId, tote_id: tote.id })),
      )
      expect(count(answers, 200), answers.map((a) => a.text).join('\n')).toBe(1)
      expect(count(answers, 409)).toBe(9)
      const bound = await api.service.db.selectFrom('deliveries').select('id').where('tote_id', '=', tote.id).execute()
      expect(bound).toHaveLength(1)
    })
  })
}
