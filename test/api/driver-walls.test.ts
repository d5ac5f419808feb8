import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { openSse, type SseStream } from '../helpers/sse.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import { signedInToken } from '../helpers/users.js'
import { waitFor } from '../helpers/wait.js'

/**
 * A driver user sees only the deliveries assigned to them: not those of the other drivers of
 * the same fleet, on any route a driver's token reaches, on SQLite and PostgreSQL (the event
 * feed's SQL differs).
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const signature = 'data:image/png;base64,iVBORw0KGgo='
type Event = { id: string; type: string; delivery_id: string | null }

function describeWalls(store: StoreUnderTest) {
  describe(`a driver's token on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let pharmacyId: string
    let fleet: { fleetId: string; driverId: string; driver2Id: string }
    let driver: string
    let mine: string
    let theirs: string
    const open: SseStream[] = []

    /** A delivery dispatched to `driverId` of the fleet. */
    async function dispatchedTo(driverId: string) {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId, driver_id: driverId })
      expect(res.status, res.text).toBe(200)
      return rx.delivery_id
    }
    const act = async (deliveryId: string, action: string, body: Record<string, unknown>) => {
      const res = await api.post(`/v1/deliveries/${deliveryId}/${action}`, admin, body)
      expect(res.status, res.text).toBe(200)
    }
    /** Every event the token lists, page after page. */
    async function listAll(path: string, token: string): Promise<Event[]> {
      const all: Event[] = []
      let cursor: string | null = null
      do {
        const page: any = await api.get(`${path}${path.includes('?') ? '&' : '?'}limit=100${cursor ? `&cursor=${cursor}` : ''}`, token)
        expect(page.status, page.text).toBe(200)
        all.push(...page.body.data)
        cursor = page.body.next_cursor
      } while (cursor)
      return all
    }
    const eventsOf = async (deliveryId: string) =>
      api.service.db.selectFrom('events').select(['id', 'type']).where('delivery_id', '=', deliveryId).orderBy('pos').execute()
    const stream = async (path: string, headers: Record<string, string> = {}) => {
      const s = await openSse(`${base}${path}`, driver, headers)
      open.push(s)
      return s
    }

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' })
      base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      fleet = await api.fleetWithDriver(admin)
      driver = await signedInToken(api, admin, { role: 'driver', fleet_id: fleet.fleetId, driver_id: fleet.driverId })
      // Interleaved, so that the other driver's events stand between this driver's in the feed.
      mine = await dispatchedTo(fleet.driverId)
      theirs = await dispatchedTo(fleet.driver2Id)
      await act(mine, 'pickup', { from: pharmacyId, to: fleet.driverId, signature })
      await act(theirs, 'pickup', { from: pharmacyId, to: fleet.driver2Id, signature })
      await act(theirs, 'fail', { reason: 'patient_unavailable', note: 'nobody home' })
      await act(mine, 'fail', { reason: 'patient_unavailable', note: 'dog in the yard' })
      // On PostgreSQL the feed lists an event once the transactions running when it was written have ended.
      const lastOfMine = (await eventsOf(mine)).at(-1)!.id
      await waitFor(async () => (await api.get(`/v1/events/${lastOfMine}`, admin)).status === 200, 20_000, 'the events to be listed')
      await waitFor(
        async () => (await listAll('/v1/events', admin)).some((e) => e.id === lastOfMine),
        20_000,
        'the feed to list the last event',
      )
    })
    afterAll(async () => {
      await Promise.all(open.map((s) => s.close()))
      await api?.stop()
      await store.cleanup()
    })

    it('lists and reads only its own deliveries, their custody, parties and temperature', async () => {
      const list = await listAll('/v1/deliveries', driver)
      expect(list.map((d) => d.id)).toEqual([mine])
      for (const path of ['', '/custody/verify', '/parties', '/temperature', '/temperature.svg']) {
        expect((await api.get(`/v1/deliveries/${mine}${path}`, driver)).status, path).toBe(200)
        expect((await api.get(`/v1/deliveries/${theirs}${path}`, driver)).status, path).toBe(404)
      }
      const csv = await api.request('GET', `/v1/deliveries/${theirs}/temperature`, { token: driver, headers: { accept: 'text/csv' } })
      expect(csv.status).toBe(404)
    })

    it("lists the events of its own deliveries and none of another driver's", async () => {
      const listed = await listAll('/v1/events', driver)
      expect(listed.map((e) => e.type)).toEqual(expect.arrayContaining(['delivery.dispatched', 'delivery.picked-up', 'delivery.failed']))
      expect(new Set(listed.map((e) => e.delivery_id))).toEqual(new Set([mine]))
      expect(await listAll(`/v1/events?delivery_id=${theirs}`, driver)).toEqual([])
    })

    it("answers another driver's event like an unknown one, read or named in after=", async () => {
      // Of the fleet (a delivery's first event, delivery.created, is the pharmacy's alone).
      const theirsFirst = (await eventsOf(theirs)).find((e) => e.type === 'delivery.dispatched')
      const dispatched = (await eventsOf(mine)).find((e) => e.type === 'delivery.dispatched')!
      expect((await api.get(`/v1/events/${dispatched.id}`, driver)).status).toBe(200)
      expect((await api.get(`/v1/events?after=${dispatched.id}`, driver)).status).toBe(200)
      const foreign = await api.get(`/v1/events/${theirsFirst!.id}`, driver)
      const unknown = await api.get('/v1/events/evt_01jd0000000000000000000000', driver)
      expect(foreign.status).toBe(404)
      expect(foreign.body.detail).toBe(unknown.body.detail)
      expect((await api.get(`/v1/events?after=${theirsFirst!.id}`, driver)).status).toBe(404)
      expect((await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?after=${theirsFirst!.id}`, driver)).status).toBe(404)
    })

    it("lists only its own deliveries' exceptions in the fleet's exception feed", async () => {
      const listed = await listAll(`/v1/fleets/${fleet.fleetId}/exceptions`, driver)
      expect(listed.map((e) => [e.type, e.delivery_id])).toEqual([['delivery.failed', mine]])
      // The fleet itself (an unrestricted token here) sees both.
      const all = await listAll(`/v1/fleets/${fleet.fleetId}/exceptions`, admin)
      expect(all.map((e) => e.delivery_id)).toEqual(expect.arrayContaining([mine, theirs]))
    })

    it("resumes the event stream with Last-Event-ID past another driver's events without showing them", async () => {
      const dispatched = (await eventsOf(mine)).find((e) => e.type === 'delivery.dispatched')!
      const s = await stream('/v1/events/stream', { 'last-event-id': dispatched.id })
      expect(s.status, s.text).toBe(200)
      await s.until(() => s.events().some((e) => e.event === 'delivery.failed'), 'its delivery.failed')
      expect(new Set(s.events().map((e) => e.data.delivery_id))).toEqual(new Set([mine]))
      const theirsFirst = (await eventsOf(theirs)).find((e) => e.type === 'delivery.dispatched')
      const refused = await stream('/v1/events/stream', { 'last-event-id': theirsFirst!.id })
      expect(refused.status).toBe(404)
    })

    it("follows live only its own deliveries' events and exceptions", async () => {
      const events = await stream('/v1/events/stream')
      const exceptions = await stream(`/v1/fleets/${fleet.fleetId}/exceptions/stream`)
      expect([events.status, exceptions.status]).toEqual([200, 200])
      // The other driver's come first in the feed: a stream that showed them would have them before its own.
      const theirsLive = await dispatchedTo(fleet.driver2Id)
      await act(theirsLive, 'pickup', { from: pharmacyId, to: fleet.driver2Id, signature })
      await act(theirsLive, 'fail', { reason: 'patient_unavailable', note: 'closed' })
      const mineLive = await dispatchedTo(fleet.driverId)
      await act(mineLive, 'pickup', { from: pharmacyId, to: fleet.driverId, signature })
      await act(mineLive, 'fail', { reason: 'patient_unavailable', note: 'closed' })
      await events.until(() => events.events().some((e) => e.event === 'delivery.failed' && e.data.delivery_id === mineLive), 'its failure')
      await exceptions.until(() => exceptions.events().some((e) => e.data.delivery_id === mineLive), 'its exception')
      expect(new Set(events.events().map((e) => e.data.delivery_id))).toEqual(new Set([mineLive]))
      expect(exceptions.events().map((e) => [e.event, e.data.delivery_id])).toEqual([['delivery.failed', mineLive]])
    })

    it("resumes the exception stream past another driver's exceptions without showing them", async () => {
      const dispatched = (await eventsOf(mine)).find((e) => e.type === 'delivery.dispatched')!
      const s = await stream(`/v1/fleets/${fleet.fleetId}/exceptions/stream`, { 'last-event-id': dispatched.id })
      expect(s.status, s.text).toBe(200)
      await s.until(() => s.events().some((e) => e.data.delivery_id === mine), 'its exception')
      expect(s.events().every((e) => e.data.delivery_id !== theirs)).toBe(true)
    })

    it("is refused the fleet's dashboard, embed sessions, drivers, rate card and reconciliation", async () => {
      for (const path of ['dashboard', 'drivers', 'rate-card', 'rate-card/versions', 'reconciliation']) {
        expect((await api.get(`/v1/fleets/${fleet.fleetId}/${path}`, driver)).status, path).toBe(403)
      }
      expect((await api.post(`/v1/fleets/${fleet.fleetId}/embed-sessions`, driver, {})).status).toBe(403)
    })

    it('records a failed attempt at the door on its own delivery only; sending it out again is the dispatcher’s', async () => {
      const ownRun = await dispatchedTo(fleet.driverId)
      const otherRun = await dispatchedTo(fleet.driver2Id)
      await act(ownRun, 'pickup', { from: pharmacyId, to: fleet.driverId, signature })
      await act(otherRun, 'pickup', { from: pharmacyId, to: fleet.driver2Id, signature })
      const failure = { reason: 'address_problem', note: 'no such flat number' }
      expect((await api.post(`/v1/deliveries/${otherRun}/fail`, driver, failure)).status).toBe(404)
      const failed = await api.post(`/v1/deliveries/${ownRun}/fail`, driver, failure)
      expect(failed.status, failed.text).toBe(200)
      expect(failed.body).toMatchObject({ status: 'FAILED', attempts: [{ number: 1, reason: 'address_problem' }] })
      const again = await api.post(`/v1/deliveries/${ownRun}/reattempt`, driver, {})
      expect([again.status, again.body.code]).toEqual([403, 'insufficient_scope'])
    })
  })
}

describeWalls(sqliteStore)
if (url) describeWalls(postgresStore(url))
