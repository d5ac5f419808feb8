import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { MINUTE, SECOND, testClock } from '../helpers/clock.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import { lastPosition } from '../../src/services/driver-positions.js'
import { eventsOf, lastMileWorld, northOfDoor, signature } from './fixtures.js'

/**
 * Drivers post positions (docs/fleet.md, Live location and ETA); the ETA of a delivery on its way
 * follows them, `delivery.eta-changed` and `delivery.arriving` go out at their thresholds, and only
 * the delivery's pharmacy, fleet and driver see where it is. Time is the service's clock, moved by hand.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const ETA_EVENTS = ['delivery.eta-changed', 'delivery.arriving']

function describePositions(store: StoreUnderTest) {
  describe(`positions and ETA on ${store.name}`, () => {
    const clock = testClock(Date.parse('2026-11-29T14:00:00Z'))
    let api: TestApi
    let world: Awaited<ReturnType<typeof lastMileWorld>>
    const at = (offsetMs = 0) => new Date(clock.now() + offsetMs).toISOString()
    const post = (driverId: string, token: string, positions: unknown[]) =>
      api.post(`/v1/drivers/${driverId}/locations`, token, { positions })
    const here = (metres: number, offsetMs = 0) => ({ ...northOfDoor(metres), accuracy_m: 8, at: at(offsetMs) })

    beforeAll(async () => {
      api = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' }, { clock })
      world = await lastMileWorld(api, 60 * MINUTE)
    })
    afterAll(async () => {
      await api.stop()
      await store.cleanup()
    })

    it('refuses bad batches whole: out-of-range values, a position in the future, more than 100, unknown members', async () => {
      const { driverToken, fleet } = world
      await world.outFor(fleet.driverId)
      const cases: [unknown[], string][] = [
        [[{ ...here(1_000), lat: 91 }], '/positions/0/lat'],
        [[here(1_000), { ...here(1_000), lng: -180.5 }], '/positions/1/lng'],
        [[{ ...here(1_000), accuracy_m: -1 }], '/positions/0/accuracy_m'],
        [[here(1_000, 61 * SECOND)], '/positions/0/at'],
        [[{ ...here(1_000), at: 'yesterday' }], '/positions/0/at'],
        [[{ ...here(1_000), speed: 3 }], '/positions/0/speed'],
        [Array.from({ length: 101 }, (_, i) => here(1_000, -i * SECOND)), '/positions'],
        [[], '/positions'],
      ]
      for (const [positions, pointer] of cases) {
        const res = await post(fleet.driverId, driverToken, positions)
        expect([res.status, res.body.code], pointer).toEqual([422, 'validation_failed'])
        expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toContain(pointer)
      }
      // 60 s ahead is within the allowed clock skew; 100 positions is the limit.
      const fine = await post(
        fleet.driverId,
        driverToken,
        Array.from({ length: 100 }, (_, i) => here(1_000, 60 * SECOND - i * SECOND)),
      )
      expect(fine.status, fine.text).toBe(200)
      expect(fine.body.accepted).toBe(100)
    })

    it("keeps drivers to their own positions: another driver, another fleet's driver and a pharmacy get 404", async () => {
      const { fleet, other, secondDriverToken, otherDriverToken, driverToken } = world
      const batch = [here(2_000)]
      for (const [driverId, token] of [
        [fleet.driverId, secondDriverToken],
        [fleet.driverId, otherDriverToken],
        [other.driverId, driverToken],
      ] as const) {
        const res = await post(driverId, token, batch)
        expect([res.status, res.body.code]).toEqual([404, 'not_found'])
      }
      const pharmacy = await api.post('/v1/oauth/clients', world.admin, {
        client_name: 'pharmacy app',
        scope: 'custody:write deliveries:read',
        pharmacy_id: world.pharmacyId,
      })
      const pharmacyToken = await api.tokenFor(pharmacy.body.client_id, pharmacy.body.client_secret)
      expect((await post(fleet.driverId, pharmacyToken, batch)).status).toBe(404)
      // A driver with nothing in progress: 409, nothing stored.
      const idle = await post(fleet.driver2Id, secondDriverToken, batch)
      expect([idle.status, idle.body.code]).toEqual([409, 'not_on_delivery'])
    })

    it("shows a delivery's positions to its pharmacy, fleet and driver only", async () => {
      const { fleet, other, driverToken, secondDriverToken, otherDriverToken, admin } = world
      const { deliveryId } = await world.outFor(fleet.driverId)
      expect((await post(fleet.driverId, driverToken, [here(3_000, -2 * SECOND), here(2_900)])).status).toBe(200)
      const mine = await api.get(`/v1/deliveries/${deliveryId}/locations`, driverToken)
      expect(mine.status, mine.text).toBe(200)
      expect(mine.body.data).toHaveLength(2)
      expect(mine.body.data[1]).toMatchObject({ driver_id: fleet.driverId, accuracy_m: 8 })
      expect(await lastPosition(api.service.db, deliveryId)).toEqual({ ...northOfDoor(2_900), accuracy_m: 8, at: at() })
      expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, admin)).body.data).toHaveLength(2)
      const paged = await api.get(`/v1/deliveries/${deliveryId}/locations?limit=1`, admin)
      expect(paged.body.next_cursor).not.toBeNull()
      const next = await api.get(`/v1/deliveries/${deliveryId}/locations?limit=1&after=${paged.body.next_cursor}`, admin)
      expect(next.body).toMatchObject({ data: [{ at: at() }], next_cursor: null })
      // Newest first: where the driver was last seen in one small request, then the page before it.
      const newest = await api.get(`/v1/deliveries/${deliveryId}/locations?order=desc&limit=1`, admin)
      expect(newest.body).toMatchObject({ data: [{ ...northOfDoor(2_900), at: at() }] })
      const older = await api.get(`/v1/deliveries/${deliveryId}/locations?order=desc&limit=1&before=${newest.body.next_cursor}`, admin)
      expect(older.body).toMatchObject({ data: [{ ...northOfDoor(3_000), at: at(-2 * SECOND) }], next_cursor: null })
      // In a list, one query for the page: the newest position and how far it is from the door.
      const listed = await api.get(`/v1/deliveries?status=PICKED_UP&limit=100&expand=last_position`, admin)
      expect(listed.status, listed.text).toBe(200)
      const item = listed.body.data.find((d: { id: string }) => d.id === deliveryId)
      expect(item.last_position).toEqual({ ...northOfDoor(2_900), accuracy_m: 8, at: at(), distance_m: 2_900 })
      const ended = await api.get(`/v1/deliveries?status=QUEUED&limit=1&expand=last_position`, admin)
      for (const d of ended.body.data) expect(d.last_position).toBeNull()
      const sideways = await api.get(`/v1/deliveries/${deliveryId}/locations?order=sideways`, admin)
      expect([sideways.status, sideways.body.code]).toEqual([422, 'validation_failed'])
      for (const token of [secondDriverToken, otherDriverToken]) {
        expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, token)).status).toBe(404)
      }
      const otherFleet = await api.post('/v1/oauth/clients', admin, { client_name: 'g', scope: 'deliveries:read', fleet_id: other.fleetId })
      const g = await api.tokenFor(otherFleet.body.client_id, otherFleet.body.client_secret)
      expect((await api.get(`/v1/deliveries/${deliveryId}/locations`, g)).status).toBe(404)
    })

    it('moves the ETA with each position, announces a move of 5 min or more at most once a minute, and arriving once', async () => {
      const { fleet, admin } = world
      const { deliveryId, deliverBy } = await world.outFor(fleet.driver2Id)
      const send = async (metres: number) => {
        const res = await post(fleet.driver2Id, world.secondDriverToken, [here(metres)])
        expect(res.status, res.text).toBe(200)
      }
      const eta = async () => (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.eta as string
      expect(await eta()).toBe(deliverBy)

      // 10 km at 25 km/h: 24 min, 36 min before the promise → announced.
      await send(10_000)
      expect(await eta()).toBe(at(24 * MINUTE))
      expect(await eventsOf(api, deliveryId, ETA_EVENTS)).toEqual([
        { type: 'delivery.eta-changed', data: { eta: at(24 * MINUTE), previous_eta: deliverBy, source: 'computed', distance_m: 10_000 } },
      ])
      // Half a minute later, the same place: the ETA follows (30 s later), nothing announced.
      clock.advance(30 * SECOND)
      await send(10_000)
      expect(await eta()).toBe(at(24 * MINUTE))
      expect(await eventsOf(api, deliveryId, ETA_EVENTS)).toHaveLength(1)
      // Twice as far 10 s later: a 24-min move, held back by the minute…
      clock.advance(10 * SECOND)
      await send(20_000)
      expect(await eta()).toBe(at(48 * MINUTE))
      expect(await eventsOf(api, deliveryId, ETA_EVENTS)).toHaveLength(1)
      // …and announced by the first position once the minute is over, from the ETA last announced.
      const announced = (await eventsOf(api, deliveryId, ETA_EVENTS))[0]!.data.eta
      clock.advance(20 * SECOND)
      await send(20_000)
      expect((await eventsOf(api, deliveryId, ETA_EVENTS)).slice(1)).toEqual([
        { type: 'delivery.eta-changed', data: { eta: at(48 * MINUTE), previous_eta: announced, source: 'computed', distance_m: 20_000 } },
      ])
      // Within 500 m: arriving (once), and the ETA change with it once the minute allows.
      clock.advance(MINUTE)
      await send(450)
      clock.advance(MINUTE)
      await send(300)
      const all = await eventsOf(api, deliveryId, ETA_EVENTS)
      expect(all.map((e) => e.type)).toEqual(['delivery.eta-changed', 'delivery.eta-changed', 'delivery.eta-changed', 'delivery.arriving'])
      expect(all[3]!.data).toEqual({ eta: all[2]!.data.eta, distance_m: 450 })
      // The events reach the event list (and webhooks) like any other, with the delivery's tenants.
      // (On PostgreSQL the event list shows an event once every earlier transaction has settled: poll.)
      const listed = async () => (await api.get(`/v1/events?delivery_id=${deliveryId}&limit=100`, admin)).body.data as { type: string }[]
      await expect.poll(async () => (await listed()).filter((e) => ETA_EVENTS.includes(e.type)).length, { timeout: 10_000 }).toBe(4)
      expect((await listed()).at(-1)).toMatchObject({ type: 'delivery.arriving', fleet_id: fleet.fleetId, pharmacy_id: world.pharmacyId })
    })

    it('starts the ETA afresh on a reattempt: the old one is gone, and arriving is announced again', async () => {
      const { fleet, admin } = world
      const { deliveryId, deliverBy } = await world.outFor(fleet.driverId)
      const send = async (metres: number) => {
        clock.advance(MINUTE)
        const res = await post(fleet.driverId, world.driverToken, [here(metres)])
        expect(res.status, res.text).toBe(200)
      }
      const eta = async () => (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.eta as string
      await send(2_000)
      await send(300) // at the door: arriving
      const failed = await api.post(`/v1/deliveries/${deliveryId}/fail`, world.driverToken, { reason: 'patient_unavailable' })
      expect(failed.status, failed.text).toBe(200)
      const again = await api.post(`/v1/deliveries/${deliveryId}/reattempt`, admin, {})
      expect(again.status, again.text).toBe(200)
      // Until the new attempt's first position, the delivery shows the promise, not the last attempt's ETA.
      expect(await eta()).toBe(deliverBy)
      clock.advance(3 * MINUTE) // out again
      const picked = await api.post(`/v1/deliveries/${deliveryId}/pickup`, admin, { from: fleet.driverId, to: fleet.driverId, signature })
      expect(picked.status, picked.text).toBe(200)
      await send(5_000)
      expect(await eta()).toBe(at(12 * MINUTE)) // 5 km at 25 km/h
      await send(200)
      const types = (await eventsOf(api, deliveryId, ETA_EVENTS)).map((e) => e.type)
      expect(types.filter((t) => t === 'delivery.arriving')).toHaveLength(2)
      expect(types.at(-1)).toBe('delivery.arriving')
    })

    it("lets the fleet's router post an ETA that wins for 15 minutes; a pharmacy may not", async () => {
      const { fleet, admin } = world
      const { deliveryId } = await world.outFor(fleet.driverId)
      const dispatcher = await api.post('/v1/oauth/clients', admin, {
        client_name: 'router',
        scope: 'custody:write deliveries:read',
        fleet_id: fleet.fleetId,
      })
      const router = await api.tokenFor(dispatcher.body.client_id, dispatcher.body.client_secret)
      const pharmacy = await api.post('/v1/oauth/clients', admin, {
        client_name: 'pharmacy',
        scope: 'custody:write deliveries:read',
        pharmacy_id: world.pharmacyId,
      })
      const pharmacyToken = await api.tokenFor(pharmacy.body.client_id, pharmacy.body.client_secret)
      const put = (token: string, eta: string) => api.request('PUT', `/v1/deliveries/${deliveryId}/eta`, { token, body: { eta } })

      expect((await put(pharmacyToken, at(10 * MINUTE))).status).toBe(403)
      const posted = await put(router, at(90 * MINUTE))
      expect(posted.status, posted.text).toBe(200)
      expect(posted.body).toEqual({ eta: at(90 * MINUTE), source: 'router', until: at(15 * MINUTE) })
      expect((await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.eta).toBe(at(90 * MINUTE))
      expect((await eventsOf(api, deliveryId, ETA_EVENTS)).map((e) => e.data.source)).toEqual(['router'])
      // A position while the router's ETA holds does not move it… (the fleet's own client posts it
      // for its driver; tokens last 15 min, so each is asked for at the clock's new time)
      const fleetToken = () => api.tokenFor(dispatcher.body.client_id, dispatcher.body.client_secret)
      const etaNow = async () => (await api.get(`/v1/deliveries/${deliveryId}`, await api.adminToken())).body.eta
      clock.advance(2 * MINUTE)
      expect((await post(fleet.driverId, await fleetToken(), [here(5_000)])).status).toBe(200)
      expect(await etaNow()).toBe(at(88 * MINUTE))
      // …after 15 minutes the computed one takes over.
      clock.advance(14 * MINUTE)
      expect((await post(fleet.driverId, await fleetToken(), [here(5_000)])).status).toBe(200)
      expect(await etaNow()).toBe(at(12 * MINUTE))
      expect((await eventsOf(api, deliveryId, ETA_EVENTS)).map((e) => e.data.source)).toEqual(['router', 'computed'])
    })

    it('deletes the positions of deliveries over for longer than the retention, in batches', async () => {
      const fresh = await store.start({ PASSWORD_SCRYPT_LOG2_N: '10' }, { clock })
      try {
        const w = await lastMileWorld(fresh, 60 * MINUTE)
        const { deliveryId } = await w.outFor(w.fleet.driverId)
        const batch = Array.from({ length: 25 }, (_, i) => ({ ...northOfDoor(1_000), accuracy_m: 5, at: at(-i * SECOND) }))
        expect((await fresh.post(`/v1/drivers/${w.fleet.driverId}/locations`, w.driverToken, { positions: batch })).status).toBe(200)
        const delivered = await fresh.post(`/v1/deliveries/${deliveryId}/deliver`, w.admin, {
          verification: { method: 'signature', evidence: signature },
        })
        expect(delivered.status, delivered.text).toBe(200)
        const positions = fresh.service.services.positions
        const count = async () =>
          Number(
            (
              await fresh.service.db
                .selectFrom('driver_positions')
                .select((eb) => eb.fn.countAll().as('n'))
                .executeTakeFirstOrThrow()
            ).n,
          )
        // Within the retention: kept by the service's expirer pass, and still shown.
        await fresh.service.expirer.pass()
        expect(await count()).toBe(25)
        clock.advance(30 * 24 * 60 * MINUTE + MINUTE)
        // Past it: removed at most a batch at a time, then the rest by the expirer's next pass.
        expect(await positions.purgeEnded(30 * 24 * 60 * MINUTE, 10)).toBe(10)
        expect(await count()).toBe(15)
        await fresh.service.expirer.pass()
        expect(await count()).toBe(0)
        expect(await lastPosition(fresh.service.db, deliveryId)).toBeNull()
      } finally {
        await fresh.stop()
      }
    })
  })
}

describePositions(sqliteStore)
if (url) describePositions(postgresStore(url))
