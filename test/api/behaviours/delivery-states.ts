import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { HOUR, MINUTE, testClock } from '../../helpers/clock.js'
import type { TestApi } from '../../helpers/service.js'
import type { StoreUnderTest } from '../../helpers/stores.js'
import { signedInPerson } from '../../helpers/users.js'

type CustodyEvent = {
  seq: number
  type: string
  from: string | null
  to: string | null
  occurred_at: string
  recorded_at: string
  evidence_hash: string | null
}

/** Every state and action of SPEC §3, the same on every entity store. */
export function describeDeliveryStates(store: StoreUnderTest) {
  describe(`delivery states on ${store.name}`, () => {
    const clock = testClock(Date.parse('2031-03-04T09:00:00.000Z'))
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let fleet: Awaited<ReturnType<TestApi['fleetWithDriver']>>

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' }, { clock })
    })
    afterAll(() => api.stop())
    // Tokens live 15 min and these tests move the clock by hours.
    const token = () => api.adminToken()
    const at = (ms: number) => new Date(ms).toISOString()
    const act = async (id: string, action: string, body: unknown) => api.post(`/v1/deliveries/${id}/${action}`, await token(), body)
    const ok = async (id: string, action: string, body: unknown) => {
      const res = await act(id, action, body)
      expect(res.status, `${action}: ${res.text}`).toBe(200)
      return res.body
    }
    const custody = async (id: string): Promise<CustodyEvent[]> => (await api.get(`/v1/deliveries/${id}`, await token())).body.custody
    const verify = async (id: string) => (await api.get(`/v1/deliveries/${id}/custody/verify`, await token())).body
    const eventTypes = async (id: string) =>
      (await api.get(`/v1/events?delivery_id=${id}`, await token())).body.data.map((e: { type: string }) => e.type)
    /** A pharmacist of the pharmacy signed in now (tokens live 15 min and these tests move the clock by hours). */
    const pharmacistNow = async () => signedInPerson(api, await token(), { role: 'pharmacist', pharmacy_id: pharmacyId })
    /** A disposition signed by a pharmacist with their password (docs/part11.md). */
    const signed = async (id: string, body: { decision: 'release' | 'return'; note?: string; occurred_at?: string }) => {
      const person = await pharmacistNow()
      const meaning = body.decision === 'release' ? 'released' : 'returned'
      return api.post(`/v1/deliveries/${id}/disposition`, person.token, { ...body, signature: { meaning, password: person.password } })
    }
    const queue = async (extra: Record<string, unknown> = {}) => api.prescription(await token(), { pharmacy_id: pharmacyId, ...extra })

    beforeAll(async () => {
      admin = await token()
      pharmacyId = (await api.pharmacy(admin)).id
      fleet = await api.fleetWithDriver(admin)
    })

    it('records when things physically happened: an occurred_at in the past is kept in the custody event', async () => {
      const start = clock.now()
      const rx = await queue()
      clock.advance(2 * HOUR) // the driver's phone was offline; it syncs now
      await ok(rx.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId, occurred_at: at(start + 10 * MINUTE) })
      await ok(rx.delivery_id, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig-a', occurred_at: at(start + 20 * MINUTE) })
      await ok(rx.delivery_id, 'handoff', {
        from: fleet.driverId,
        to: fleet.driver2Id,
        signature: 'sig-b',
        occurred_at: '2031-03-04T09:45:00Z',
      })
      const delivered = await ok(rx.delivery_id, 'deliver', { verification: { method: 'id_check', evidence: 'DL 1234' } })
      expect(delivered.status).toBe('DELIVERED')
      const chain = await custody(rx.delivery_id)
      expect(chain.map((e) => e.type)).toEqual(['created', 'dispatched', 'picked_up', 'handoff', 'delivered'])
      expect(chain.map((e) => e.occurred_at)).toEqual([
        at(start),
        at(start + 10 * MINUTE),
        at(start + 20 * MINUTE),
        '2031-03-04T09:45:00.000Z',
        at(start + 2 * HOUR),
      ])
      expect(chain.slice(1).every((e) => e.recorded_at === at(start + 2 * HOUR))).toBe(true)
      expect(chain.map((e) => [e.from, e.to])).toEqual([
        [null, pharmacyId],
        [pharmacyId, fleet.driverId],
        [pharmacyId, fleet.driverId],
        [fleet.driverId, fleet.driver2Id],
        [fleet.driver2Id, 'patient'],
      ])
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 5 })
    })

    it('refuses an occurred_at in the future, or before the previous custody event, with 422 at /occurred_at', async () => {
      const rx = await queue()
      clock.advance(HOUR)
      const future = await act(rx.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, occurred_at: at(clock.now() + 10 * MINUTE) })
      expect(future.status).toBe(422)
      expect(future.body.errors).toEqual([expect.objectContaining({ pointer: '/occurred_at' })])
      await ok(rx.delivery_id, 'dispatch', {
        fleet_id: fleet.fleetId,
        driver_id: fleet.driverId,
        occurred_at: at(clock.now() - 30 * MINUTE),
      })
      const earlier = await act(rx.delivery_id, 'pickup', {
        from: pharmacyId,
        to: fleet.driverId,
        signature: 's',
        occurred_at: at(clock.now() - 40 * MINUTE),
      })
      expect(earlier.status).toBe(422)
      expect(earlier.body.errors).toEqual([
        expect.objectContaining({ pointer: '/occurred_at', message: expect.stringMatching(/previous custody event/) }),
      ])
      const notUtc = await act(rx.delivery_id, 'pickup', {
        from: pharmacyId,
        to: fleet.driverId,
        signature: 's',
        occurred_at: '2031-03-04T10:00:00+02:00',
      })
      expect(notUtc.status).toBe(422)
      expect((await custody(rx.delivery_id)).map((e) => e.type)).toEqual(['created', 'dispatched'])
    })

    it('fails an attempt and returns the goods to the pharmacy, releasing the tote for the next delivery', async () => {
      const tote = await api.tote(await token(), { pharmacy_id: pharmacyId })
      const rx = await queue({ cold_chain: true })
      await ok(rx.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId, tote_id: tote.id })
      await ok(rx.delivery_id, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
      clock.advance(MINUTE)
      const failed = await ok(rx.delivery_id, 'fail', { reason: 'patient_unavailable', note: 'nobody home' })
      expect(failed.status).toBe('FAILED')
      // The goods are still with the driver: another tote user must wait.
      const next = await queue({ cold_chain: true })
      expect((await act(next.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id })).status).toBe(409)
      const wrongHolder = await act(rx.delivery_id, 'return', { from: fleet.driver2Id, to: pharmacyId, signature: 'sig' })
      expect(wrongHolder.status).toBe(422)
      expect(wrongHolder.body.errors).toEqual([expect.objectContaining({ pointer: '/from' })])
      clock.advance(MINUTE)
      const returned = await ok(rx.delivery_id, 'return', { from: fleet.driverId, to: pharmacyId, signature: 'pharmacist sig' })
      expect(returned.status).toBe('RETURNED')
      expect((await custody(rx.delivery_id)).map((e) => e.type)).toEqual(['created', 'dispatched', 'picked_up', 'failed', 'returned'])
      // On PostgreSQL the feed lists an event once older transactions on the server have ended.
      await expect
        .poll(() => eventTypes(rx.delivery_id), { timeout: 15_000 })
        .toEqual([
          'delivery.created',
          'delivery.dispatched',
          'custody.handoff-signed',
          'delivery.picked-up',
          'delivery.failed',
          'custody.handoff-signed',
          'delivery.returned',
        ])
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 5 })
      clock.advance(MINUTE)
      await ok(next.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id })
    })

    it('cancels before pickup, from QUEUED and from DISPATCHED, and nothing after', async () => {
      const queued = await queue()
      expect((await ok(queued.delivery_id, 'cancel', { reason: 'duplicate order' })).status).toBe('CANCELLED')
      const tote = await api.tote(await token(), { pharmacy_id: pharmacyId })
      const dispatched = await queue({ cold_chain: true })
      await ok(dispatched.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id })
      clock.advance(MINUTE)
      await ok(dispatched.delivery_id, 'cancel', { reason: 'patient moved' })
      await expect
        .poll(() => eventTypes(dispatched.delivery_id), { timeout: 15_000 })
        .toEqual(['delivery.created', 'delivery.dispatched', 'delivery.cancelled'])
      clock.advance(MINUTE)
      await ok((await queue({ cold_chain: true })).delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id }) // tote released

      const pickedUp = await queue()
      await ok(pickedUp.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
      await ok(pickedUp.delivery_id, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 's' })
      const late = await act(pickedUp.delivery_id, 'cancel', { reason: 'too late' })
      expect(late.status).toBe(409)
      expect(late.body).toMatchObject({ code: 'invalid_transition', allowed_actions: ['handoff', 'deliver', 'fail', 'return'] })
      const after = await act(queued.delivery_id, 'dispatch', { fleet_id: fleet.fleetId })
      expect(after.body).toMatchObject({ code: 'invalid_transition', allowed_actions: [] })
    })

    it('requires a tote for a cold-chain dispatch, and refuses one bound to another open delivery', async () => {
      const tote = await api.tote(await token(), { pharmacy_id: pharmacyId })
      const first = await queue({ cold_chain: true })
      const noTote = await act(first.delivery_id, 'dispatch', { fleet_id: fleet.fleetId })
      expect(noTote.status).toBe(422)
      expect(noTote.body.errors).toEqual([expect.objectContaining({ pointer: '/tote_id' })])
      await ok(first.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id })
      const second = await queue({ cold_chain: true })
      const taken = await act(second.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, tote_id: tote.id })
      expect(taken.status).toBe(409)
      expect(taken.body.detail).toContain(first.delivery_id)
      expect((await api.get(`/v1/deliveries/${second.delivery_id}`, await token())).body.status).toBe('QUEUED')
    })

    it('holds delivery while the cold chain is BROKEN, until a pharmacist releases it', async () => {
      const tote = await api.tote(await token(), { pharmacy_id: pharmacyId })
      const rx = await queue({ cold_chain: true })
      await ok(rx.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId, tote_id: tote.id })
      const notBroken = await signed(rx.delivery_id, { decision: 'release', note: 'looks fine' })
      expect(notBroken.body.code).toBe('invalid_transition')

      // What the rule engine writes when it declares a break.
      const row = await api.service.db
        .selectFrom('deliveries')
        .select('cold_chain')
        .where('id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      await api.service.db
        .updateTable('deliveries')
        .set({ cold_chain: JSON.stringify({ ...JSON.parse(row.cold_chain!), state: 'BROKEN', break_reason: 'hard_limit' }) })
        .where('id', '=', rx.delivery_id)
        .execute()

      // The hold is checked before the state machine: even from DISPATCHED it is cold_chain_hold.
      expect((await act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })).body.code).toBe('cold_chain_hold')
      await ok(rx.delivery_id, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 's' })
      const held = await act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })
      expect(held.status).toBe(409)
      expect(held.body.code).toBe('cold_chain_hold')

      const withoutScope = await api.post(
        `/v1/deliveries/${rx.delivery_id}/disposition`,
        await api.adminToken('deliveries:write custody:write'),
        { decision: 'release', note: 'n', signature: { meaning: 'released', password: 'p' } },
      )
      expect(withoutScope.status).toBe(403)
      const decidedAt = at(clock.now())
      clock.advance(10 * MINUTE) // recorded after the call with the driver
      const released = await signed(rx.delivery_id, {
        decision: 'release',
        note: 'excursion reviewed; stability data OK',
        occurred_at: decidedAt,
      })
      expect(released.status, released.text).toBe(200)
      expect(released.body.status).toBe('PICKED_UP')
      expect(released.body.cold_chain).toMatchObject({
        state: 'BROKEN',
        disposition: { decision: 'release', note: 'excursion reviewed; stability data OK', decided_at: decidedAt },
      })
      expect(released.body.custody.at(-2)).toMatchObject({ type: 'disposition', occurred_at: decidedAt, recorded_at: at(clock.now()) })
      expect(released.body.custody.at(-1)).toMatchObject({ type: 'signed', signature: { meaning: 'released' } })
      // One decision per delivery: a second one, either way, is refused and the first stands.
      const second = await signed(rx.delivery_id, { decision: 'return', note: 'changed my mind' })
      expect(second.status).toBe(409)
      expect(second.body).toMatchObject({ code: 'invalid_transition', detail: expect.stringContaining('already recorded') })
      expect((await api.get(`/v1/deliveries/${rx.delivery_id}`, await token())).body.cold_chain.disposition.decision).toBe('release')

      const delivered = await ok(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })
      expect(delivered.status).toBe('DELIVERED')
      expect((await custody(rx.delivery_id)).map((e) => e.type)).toEqual([
        'created',
        'dispatched',
        'picked_up',
        'disposition',
        'signed',
        'delivered',
      ])
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 6 })
    })

    it('keeps holding after a "return" disposition: the goods go back', async () => {
      const tote = await api.tote(await token(), { pharmacy_id: pharmacyId })
      const rx = await queue({ cold_chain: true })
      await ok(rx.delivery_id, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId, tote_id: tote.id })
      await ok(rx.delivery_id, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 's' })
      const row = await api.service.db
        .selectFrom('deliveries')
        .select('cold_chain')
        .where('id', '=', rx.delivery_id)
        .executeTakeFirstOrThrow()
      await api.service.db
        .updateTable('deliveries')
        .set({ cold_chain: JSON.stringify({ ...JSON.parse(row.cold_chain!), state: 'BROKEN' }) })
        .where('id', '=', rx.delivery_id)
        .execute()
      const noNote = await signed(rx.delivery_id, { decision: 'return' })
      expect(noNote.status).toBe(422)
      expect(noNote.body.errors).toEqual([expect.objectContaining({ pointer: '/note' })])
      expect((await signed(rx.delivery_id, { decision: 'return', note: 'excursion too long for insulin' })).status).toBe(200)
      expect((await act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })).body.code).toBe('cold_chain_hold')
      expect((await ok(rx.delivery_id, 'return', { from: fleet.driverId, to: pharmacyId, signature: 's' })).status).toBe('RETURNED')
    })
  })
}
