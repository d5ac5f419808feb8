import canonicalize from 'canonicalize'
import { createHash } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, testClock } from '../../helpers/clock.js'
import type { TestApi } from '../../helpers/service.js'
import type { StoreUnderTest } from '../../helpers/stores.js'
import { expectValidEpcis } from '../../epcis/epcis-schema.js'
import { feed } from '../../trace/cold-chain-delivery.js'

const sha = (value: unknown) => `sha256:${createHash('sha256').update(canonicalize(value)!).digest('hex')}`
const signature = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='

type Event = { seq: number; type: string; hash: string; temperature?: unknown; attempt?: unknown; [k: string]: unknown }

/**
 * Attempts and the temperature at each handoff (docs/api.md, Attempts; docs/api.md, Temperature at each handoff), over a
 * socket, the same on every entity store.
 */
export function describeAttempts(store: StoreUnderTest) {
  describe(`attempts and handoff temperatures on ${store.name}`, () => {
    const T0 = Date.parse('2031-05-06T14:00:00.000Z')
    const clock = testClock(T0)
    let api: TestApi
    let base: string
    const at = (ms: number) => new Date(ms).toISOString()

    beforeAll(async () => {
      api = await store.start({}, { clock })
      base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
    })
    afterAll(() => api.stop())

    /** One request over the socket, as a client sends it. */
    async function call(method: string, path: string, body?: unknown) {
      const token = await api.adminToken()
      const res = await fetch(base + path, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
      })
      const text = await res.text()
      return { status: res.status, body: text ? JSON.parse(text) : null, text }
    }
    async function ok(path: string, body: unknown = {}) {
      const res = await call('POST', path, body)
      expect(res.status, `${path}: ${res.text}`).toBe(200)
      return res.body
    }
    const verify = async (id: string) => (await call('GET', `/v1/deliveries/${id}/custody/verify`)).body

    /** A refrigerated delivery dispatched with its tote at `dispatchAt`, for a pharmacy with `max_attempts` when given. */
    async function coldChainDelivery(dispatchAt: number, maxAttempts?: number) {
      clock.set(dispatchAt - MINUTE)
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin, maxAttempts ? { max_attempts: maxAttempts } : {})
      const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
      const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' })
      clock.set(dispatchAt)
      await ok(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleetId, driver_id: driverId, tote_id: tote.id })
      return { pharmacy, tote, id: rx.delivery_id, driverId, driver2Id }
    }

    it('records the newest reading at each handoff inside the event’s hash, and an altered one breaks the chain', async () => {
      const { tote, id, pharmacy, driverId } = await coldChainDelivery(T0)
      clock.set(T0 + 20 * MINUTE)
      await feed(api, tote.id, [
        { ts: T0 + 1 * MINUTE, temp_c: 4.1 },
        { ts: T0 + 2 * MINUTE, temp_c: 5.5 },
        { ts: T0 + 10 * MINUTE, temp_c: 6.2 },
      ])
      // Recorded late by an app that was offline: the reading at 5 min is the one of 2 min, not the newest stored.
      await ok(`/v1/deliveries/${id}/pickup`, { from: pharmacy.id, to: driverId, signature, occurred_at: at(T0 + 5 * MINUTE) })
      const delivered = await ok(`/v1/deliveries/${id}/deliver`, { verification: { method: 'otp', evidence: '4321' } })
      const chain: Event[] = delivered.custody
      expect(chain.map((e) => [e.type, e.temperature])).toEqual([
        ['created', { last_c: null, at: null, state: 'OK' }],
        ['dispatched', { last_c: null, at: null, state: 'OK' }],
        ['picked_up', { last_c: 5.5, at: at(T0 + 2 * MINUTE), state: 'OK' }],
        ['delivered', { last_c: 6.2, at: at(T0 + 10 * MINUTE), state: 'OK' }],
      ])
      // Anyone with the API output and a JCS library recomputes each hash, the temperature included.
      for (const { hash, ...unsigned } of chain) expect(sha(unsigned)).toBe(hash)
      expect(await verify(id)).toMatchObject({ valid: true, length: 4 })

      // Someone edits the recorded temperature of the pickup (or strips it): the chain no longer adds up there.
      const db = api.service.db
      await sql`update custody_events set temperature = ${JSON.stringify({ last_c: 3.9, at: at(T0 + 2 * MINUTE), state: 'OK' })}
        where delivery_id = ${id} and seq = 3`.execute(db)
      expect(await verify(id)).toMatchObject({ valid: false, first_bad_seq: 3 })
      await sql`update custody_events set temperature = null where delivery_id = ${id} and seq = 3`.execute(db)
      expect(await verify(id)).toMatchObject({ valid: false, first_bad_seq: 3 })
    })

    it('keeps the member off every event of a delivery without a cold chain', async () => {
      clock.set(T0 + 2 * 60 * MINUTE)
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const { fleetId, driverId } = await api.fleetWithDriver(admin)
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: false })
      await ok(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleetId, driver_id: driverId })
      const picked = await ok(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: pharmacy.id, to: driverId, signature })
      expect(picked.custody.map((e: Event) => 'temperature' in e)).toEqual([false, false, false])
      expect(await verify(rx.delivery_id)).toMatchObject({ valid: true, length: 3 })
    })

    it('sends the same tote out again after a coded failure, up to max_attempts, then only allows return', async () => {
      const start = T0 + 4 * 60 * MINUTE
      const { tote, id, pharmacy, driverId, driver2Id } = await coldChainDelivery(start, 2)
      expect((await call('GET', `/v1/pharmacies/${pharmacy.id}`)).body.max_attempts).toBe(2)
      clock.set(start + 5 * MINUTE)
      await ok(`/v1/deliveries/${id}/pickup`, { from: pharmacy.id, to: driverId, signature })

      // An old client's free-text reason is refused with the codes it may use.
      clock.set(start + 30 * MINUTE)
      const freeText = await call('POST', `/v1/deliveries/${id}/fail`, { reason: 'Nobody home' })
      expect(freeText.status).toBe(422)
      expect(freeText.body.code).toBe('validation_failed')
      expect(JSON.stringify(freeText.body)).toContain('patient_unavailable')
      expect(JSON.stringify(freeText.body)).toContain('/reason')

      const failed = await ok(`/v1/deliveries/${id}/fail`, { reason: 'patient_unavailable', note: 'No answer at the door, left a card' })
      expect(failed).toMatchObject({ status: 'FAILED', attempt: 1, tote_id: tote.id })
      expect(failed.custody.at(-1)).toMatchObject({
        type: 'failed',
        attempt: { number: 1, reason: 'patient_unavailable', note: 'No answer at the door, left a card' },
      })

      clock.set(start + 24 * 60 * MINUTE)
      const again = await ok(`/v1/deliveries/${id}/reattempt`, { driver_id: driver2Id })
      expect(again).toMatchObject({ status: 'DISPATCHED', attempt: 2, tote_id: tote.id, driver_id: driver2Id })
      expect(again.custody.at(-1)).toMatchObject({ type: 'reattempted', attempt: { number: 2 }, to: driver2Id })

      // The binding held through the failure: a reading taken after the reattempt is the delivery's.
      await feed(api, tote.id, [{ ts: start + 24 * 60 * MINUTE + MINUTE, temp_c: 4.4 }])
      clock.set(start + 24 * 60 * MINUTE + 5 * MINUTE)
      // The first driver still holds the goods and hands them to the second.
      const picked = await ok(`/v1/deliveries/${id}/pickup`, { from: driverId, to: driver2Id, signature })
      // A day without readings was a sensor gap long enough to break the cold chain: the handoff says so.
      expect(picked.cold_chain.state).toBe('BROKEN')
      expect(Date.parse(picked.cold_chain.broken_at)).toBeLessThan(start + 24 * 60 * MINUTE + 5 * MINUTE)
      expect(picked.custody.at(-1).temperature).toEqual({ last_c: 4.4, at: at(start + 24 * 60 * MINUTE + MINUTE), state: 'BROKEN' })
      // …while the pickup of the first attempt, before the gap, recorded it whole.
      expect(picked.custody.find((e: Event) => e.type === 'picked_up').temperature).toMatchObject({ state: 'OK' })

      clock.set(start + 24 * 60 * MINUTE + 30 * MINUTE)
      await ok(`/v1/deliveries/${id}/fail`, { reason: 'refused' })
      const refused = await call('POST', `/v1/deliveries/${id}/reattempt`, {})
      expect(refused.status).toBe(409)
      // The goods go back; the broken cold chain also awaits a pharmacist's disposition.
      expect(refused.body).toMatchObject({ code: 'invalid_transition', status_now: 'FAILED', allowed_actions: ['return', 'disposition'] })
      expect(refused.body.detail).toMatch(/Attempt 2 of 2.*return/)
      // Any other refused action names the same way out, never a reattempt the pharmacy does not allow.
      const other = await call('POST', `/v1/deliveries/${id}/pickup`, { from: pharmacy.id, to: driver2Id, signature })
      expect(other.body).toMatchObject({ code: 'invalid_transition', allowed_actions: ['return', 'disposition'] })

      const returned = await ok(`/v1/deliveries/${id}/return`, { from: driver2Id, to: pharmacy.id, signature })
      expect(returned.status).toBe('RETURNED')
      expect(returned.attempt).toBe(2)
      expect(returned.attempts).toEqual([
        {
          number: 1,
          started_at: at(start),
          failed_at: at(start + 30 * MINUTE),
          reason: 'patient_unavailable',
          note: 'No answer at the door, left a card',
        },
        {
          number: 2,
          started_at: at(start + 24 * 60 * MINUTE),
          failed_at: at(start + 24 * 60 * MINUTE + 30 * MINUTE),
          reason: 'refused',
          note: null,
        },
      ])
      expect(await verify(id)).toMatchObject({ valid: true, length: returned.custody.length })

      // The reattempt is announced, and its EPCIS event (CBV `departing`) keeps the document valid.
      // On PostgreSQL an event is listed once the transactions running when it was written have ended: polled.
      const announced = async () =>
        (await call('GET', `/v1/events?delivery_id=${id}&limit=100`)).body.data
          .filter((e: { type: string }) => ['delivery.failed', 'delivery.reattempted'].includes(e.type))
          .map((e: { type: string; data: { attempt: number; reason?: string } }) => [e.type, e.data.attempt, e.data.reason])
      await expect.poll(announced, { timeout: 15_000 }).toEqual([
        ['delivery.failed', 1, 'patient_unavailable'],
        ['delivery.reattempted', 2, undefined],
        ['delivery.failed', 2, 'refused'],
      ])
      const epcis = await fetch(`${base}/v1/deliveries/${id}/epcis`, { headers: { authorization: `Bearer ${await api.adminToken()}` } })
      expect(epcis.status).toBe(200)
      const document = await epcis.json()
      expectValidEpcis(document)
      const eventList = document.epcisBody.eventList as Record<string, unknown>[]
      expect(eventList.map((e) => e.bizStep)).toEqual(['shipping', 'departing', 'shipping', 'receiving'])
      expect(eventList[2]!['rxtrace:handoffTemperature']).toEqual(picked.custody.at(-1).temperature)
    })

    it('refuses a max_attempts outside 1..10 and keeps 3 for a pharmacy that sets none', async () => {
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      expect(pharmacy).toMatchObject({ max_attempts: 3 })
      const zero = await call('PATCH', `/v1/pharmacies/${pharmacy.id}`, { max_attempts: 0 })
      expect(zero.status).toBe(422)
      const patched = await call('PATCH', `/v1/pharmacies/${pharmacy.id}`, { max_attempts: 5 })
      expect(patched.body.max_attempts).toBe(5)
    })
  })
}
