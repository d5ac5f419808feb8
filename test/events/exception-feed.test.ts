import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { exceptionDataFields } from '../../src/events/exception-feed.js'
import type { TestApi } from '../helpers/service.js'
import { openSse, type SseStream } from '../helpers/sse.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'

/**
 * A fleet's exception feed (GET /v1/fleets/{id}/exceptions and …/stream) and the
 * `handoff.refused` event a refused pickup, handoff or deliver leaves, on SQLite and PostgreSQL.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const FLEET_SCOPES = 'fleet:read deliveries:read deliveries:write custody:write'
const PHARMACY_SCOPES = 'deliveries:read deliveries:write fleet:read custody:write'
const signature = 'data:image/png;base64,iVBORw0KGgo='

function describeFeed(store: StoreUnderTest) {
  describe(`the exception feed on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let pharmacyId: string
    let fleet: { fleetId: string; driverId: string; driver2Id: string }
    let otherFleet: { fleetId: string; driverId: string }
    let fleetToken: string
    let otherFleetToken: string
    let pharmacyToken: string
    const open: SseStream[] = []

    async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
      const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
      expect(res.status, res.text).toBe(201)
      return api.tokenFor(res.body.client_id, res.body.client_secret)
    }

    /** A delivery of the pharmacy, dispatched to `to` and picked up by its driver. */
    async function pickedUp(to: { fleetId: string; driverId: string } = fleet) {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
        fleet_id: to.fleetId,
        driver_id: to.driverId,
      })
      expect(dispatched.status, dispatched.text).toBe(200)
      const picked = await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacyId, to: to.driverId, signature })
      expect(picked.status, picked.text).toBe(200)
      return rx.delivery_id
    }

    // What was recorded, from the table: on PostgreSQL GET /v1/events lists a just-committed event
    // only once the transactions running when it was written have ended.
    const eventsOf = async (deliveryId: string) =>
      (
        await api.service.db
          .selectFrom('events')
          .select(['id', 'type', 'seq', 'data'])
          .where('delivery_id', '=', deliveryId)
          .orderBy('seq')
          .execute()
      ).map((e) => ({ ...e, seq: e.seq!, data: JSON.parse(e.data) as Record<string, unknown> }))

    beforeAll(async () => {
      api = await store.start()
      const { httpPort } = await api.service.start()
      base = `http://127.0.0.1:${httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      fleet = await api.fleetWithDriver(admin)
      otherFleet = await api.fleetWithDriver(admin)
      fleetToken = await restricted(FLEET_SCOPES, { fleet_id: fleet.fleetId })
      otherFleetToken = await restricted(FLEET_SCOPES, { fleet_id: otherFleet.fleetId })
      pharmacyToken = await restricted(PHARMACY_SCOPES, { pharmacy_id: pharmacyId })
    })
    afterAll(async () => {
      await Promise.all(open.map((s) => s.close()))
      await api?.stop()
      await store.cleanup()
    })

    describe('handoff.refused', () => {
      it('records a refused handoff with its reason, numbered after the last event, and leaves the custody chain alone', async () => {
        const deliveryId = await pickedUp()
        const before = await eventsOf(deliveryId)
        const custodyBefore = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.custody
        // The goods are with the first driver: the second cannot hand them over.
        const refused = await api.post(`/v1/deliveries/${deliveryId}/handoff`, fleetToken, {
          from: fleet.driver2Id,
          to: fleet.driverId,
          signature,
        })
        expect(refused.status, refused.text).toBe(422)

        const after = await eventsOf(deliveryId)
        expect(after.length).toBe(before.length + 1)
        const event = after.at(-1)!
        expect(event.type).toBe('handoff.refused')
        expect(event.seq).toBe(before.at(-1)!.seq + 1)
        expect(event.data).toMatchObject({
          action: 'handoff',
          code: 'validation_failed',
          reason: `the goods are held by ${fleet.driverId}`,
          status: 'PICKED_UP',
          from: fleet.driver2Id,
          to: fleet.driverId,
          errors: [{ pointer: '/from', message: `the goods are held by ${fleet.driverId}` }],
        })
        expect(typeof event.data.refused_at).toBe('string')
        expect(JSON.stringify(event.data)).not.toContain(signature)

        const delivery = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
        expect(delivery.custody).toEqual(custodyBefore)
        expect((await api.get(`/v1/deliveries/${deliveryId}/custody/verify`, admin)).body).toMatchObject({
          valid: true,
          length: custodyBefore.length,
        })

        // The chain and the numbering go on as before.
        const handed = await api.post(`/v1/deliveries/${deliveryId}/handoff`, fleetToken, {
          from: fleet.driverId,
          to: fleet.driver2Id,
          signature,
        })
        expect(handed.status, handed.text).toBe(200)
        const last = await eventsOf(deliveryId)
        expect(last.map((e) => e.seq)).toEqual(last.map((_, i) => i + 1))
        expect((await api.get(`/v1/deliveries/${deliveryId}/custody/verify`, admin)).body).toMatchObject({
          valid: true,
          length: custodyBefore.length + 1,
        })
      })

      it('records a deliver refused by the state machine, and a pickup by the wrong party', async () => {
        const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
        await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        const deliver = await api.post(`/v1/deliveries/${rx.delivery_id}/deliver`, admin, {
          verification: { method: 'otp', evidence: '123456' },
        })
        expect(deliver.status).toBe(409)
        const pickup = await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, {
          from: otherFleet.driverId,
          to: fleet.driverId,
          signature,
        })
        expect(pickup.status).toBe(422)
        const refusals = (await eventsOf(rx.delivery_id)).filter((e) => e.type === 'handoff.refused')
        expect(refusals.map((e) => [e.data.action, e.data.code, e.data.status])).toEqual([
          ['deliver', 'invalid_transition', 'DISPATCHED'],
          ['pickup', 'validation_failed', 'DISPATCHED'],
        ])
        expect(refusals[0]!.data.reason).toBe('Cannot deliver a delivery that is DISPATCHED.')
        expect(JSON.stringify(refusals)).not.toContain('123456') // the verification evidence
      })

      it('records nothing for a delivery the caller cannot see, for malformed input, or for other actions', async () => {
        const theirs = await pickedUp(otherFleet)
        // The table itself: on PostgreSQL the feed may not list a just-committed event yet.
        const count = async () =>
          Number(
            (
              await api.service.db
                .selectFrom('events')
                .select((eb) => eb.fn.countAll().as('n'))
                .where('delivery_id', '=', theirs)
                .executeTakeFirstOrThrow()
            ).n,
          )
        const before = await count()
        expect(
          (await api.post(`/v1/deliveries/${theirs}/handoff`, fleetToken, { from: otherFleet.driverId, to: fleet.driverId, signature }))
            .status,
        ).toBe(404)
        expect((await api.post(`/v1/deliveries/${theirs}/handoff`, admin, { from: 'nobody', to: fleet.driverId, signature })).status).toBe(
          422,
        )
        expect((await api.post(`/v1/deliveries/${theirs}/cancel`, admin, { reason: 'too late' })).status).toBe(409)
        expect(await count()).toBe(before)
      })
    })

    describe('GET /v1/fleets/{id}/exceptions', () => {
      it("lists the fleet's cold-chain exceptions and handoff failures, and nothing else", async () => {
        const deliveryId = await pickedUp()
        const failed = await api.post(`/v1/deliveries/${deliveryId}/fail`, fleetToken, {
          reason: 'patient_unavailable',
          note: 'nobody home',
        })
        expect(failed.status, failed.text).toBe(200)
        await api.post(`/v1/deliveries/${deliveryId}/deliver`, fleetToken, { verification: { method: 'otp', evidence: '1' } })
        await api.post(`/v1/deliveries/${await pickedUp(otherFleet)}/fail`, admin, { reason: 'patient_unavailable', note: 'another fleet' })
        // On PostgreSQL an event is listed once the transactions running when it was written have
        // ended (other suites share the server): wait until both are listed.
        const bothListed = async () =>
          (await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=100&delivery_id=${deliveryId}`, fleetToken)).body.data.length === 2
        await waitFor(bothListed, 20_000, 'the exceptions to be listed')
        const page = await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=100`, fleetToken)
        expect(page.status, page.text).toBe(200)
        const mine = page.body.data.filter((e: { delivery_id: string }) => e.delivery_id === deliveryId)
        expect(mine.map((e: { type: string }) => e.type)).toEqual(['delivery.failed', 'handoff.refused'])
        expect(mine[0].data).toMatchObject({ reason: 'patient_unavailable', attempt: 1, status: 'FAILED' })
        expect(
          page.body.data.every((e: { fleet_id: string; type: string }) => e.fleet_id === fleet.fleetId && e.type in exceptionDataFields),
        ).toBe(true)
        // The envelope is GET /v1/events's, and so is the paging.
        const listed = (await api.get(`/v1/events/${mine[0].id}`, admin)).body
        expect(mine[0]).toEqual({ ...listed, data: mine[0].data })
        const first = await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=1`, fleetToken)
        const next = await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=1&cursor=${first.body.next_cursor}`, fleetToken)
        const after = await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=1&after=${first.body.data[0].id}`, fleetToken)
        expect(next.body.data).toEqual(page.body.data.slice(1, 2))
        expect(after.body.data).toEqual(next.body.data)
      })

      it('passes on only the allowlisted data members of each type: no patient field', async () => {
        const deliveryId = await pickedUp()
        const delivery = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body
        const patient = { patient_id: 'pt_secret_123', patient_name: 'Jane Roe', address: '1 Elm St', evidence: 'photo-of-id' }
        await api.service.db.transaction().execute((trx) =>
          api.service.outbox.append(
            trx,
            Object.entries(exceptionDataFields).map(([type, fields]) => ({
              type,
              pharmacy_id: pharmacyId,
              fleet_id: fleet.fleetId,
              delivery_id: deliveryId,
              rx_id: delivery.rx_id,
              data: { ...Object.fromEntries(fields.map((f) => [f, `${f} value`])), ...patient },
            })),
          ),
        )
        api.service.outbox.committed(0)
        const stream = await openSse(`${base}/v1/fleets/${fleet.fleetId}/exceptions/stream?delivery_id=${deliveryId}`, fleetToken, {
          'last-event-id': (await eventsOf(deliveryId)).at(-1 - Object.keys(exceptionDataFields).length)!.id,
        })
        open.push(stream)
        const listed = async () =>
          (await api.get(`/v1/fleets/${fleet.fleetId}/exceptions?limit=100&delivery_id=${deliveryId}`, fleetToken)).body.data
        await waitFor(
          async () => (await listed()).length === Object.keys(exceptionDataFields).length,
          20_000,
          'the exceptions to be listed',
        )
        const page = await listed()
        await stream.untilEvents(page.length)
        for (const shown of [page, stream.events().map((e) => e.data)]) {
          expect(shown.map((e: { type: string }) => e.type)).toEqual(Object.keys(exceptionDataFields))
          for (const event of shown)
            expect(Object.keys(event.data).sort()).toEqual([...exceptionDataFields[event.type as keyof typeof exceptionDataFields]].sort())
          for (const value of Object.values(patient)) expect(JSON.stringify(shown)).not.toContain(value)
        }
        // GET /v1/events, the tenant's own full record, still has what was written.
        expect(JSON.stringify(await eventsOf(deliveryId))).toContain('pt_secret_123')
      })

      it("answers another fleet's token with 404, a pharmacy token with 403, and an unknown fleet with 404", async () => {
        for (const path of ['exceptions', 'exceptions/stream']) {
          const other = await openSse(`${base}/v1/fleets/${fleet.fleetId}/${path}`, otherFleetToken)
          const pharmacy = await openSse(`${base}/v1/fleets/${fleet.fleetId}/${path}`, pharmacyToken)
          const unknown = await openSse(`${base}/v1/fleets/fl_01jd0000000000000000000000/${path}`, admin)
          const ownOther = await openSse(`${base}/v1/fleets/${otherFleet.fleetId}/${path}`, otherFleetToken)
          open.push(ownOther)
          expect([other.status, JSON.parse(other.text).code]).toEqual([404, 'not_found'])
          expect(JSON.parse(other.text).detail).toBe(JSON.parse(unknown.text).detail)
          expect([pharmacy.status, JSON.parse(pharmacy.text).code]).toEqual([403, 'insufficient_scope'])
          expect(unknown.status).toBe(404)
          expect(ownOther.status).toBe(200)
          await ownOther.close()
        }
      })

      it('streams new exceptions live, and resumes after Last-Event-ID', async () => {
        const stream = await openSse(`${base}/v1/fleets/${fleet.fleetId}/exceptions/stream`, fleetToken)
        open.push(stream)
        const deliveryId = await pickedUp()
        await api.post(`/v1/deliveries/${deliveryId}/handoff`, fleetToken, { from: fleet.driver2Id, to: fleet.driverId, signature })
        await api.post(`/v1/deliveries/${deliveryId}/fail`, fleetToken, { reason: 'address_problem', note: 'address not found' })
        await stream.untilEvents(2)
        expect(stream.events().map((e) => e.event)).toEqual(['handoff.refused', 'delivery.failed'])
        const [first, second] = stream.events()
        await stream.close()
        const resumed = await openSse(`${base}/v1/fleets/${fleet.fleetId}/exceptions/stream`, fleetToken, { 'last-event-id': first!.id })
        open.push(resumed)
        await resumed.untilEvents(1)
        expect(resumed.events()).toEqual([second])
      })
    })
  })
}

describeFeed(sqliteStore)
if (url) describeFeed(postgresStore(url))
