import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { expectValidEpcis } from './epcis-schema.js'

/**
 * docs/interop.md, EPCIS: `GET /v1/epcis/events` pages every EPCIS event of the caller's tenant as
 * EPCISQueryDocuments, in record-time order, over real HTTP, on SQLite and PostgreSQL.
 */

const { url } = await reachablePostgres()
const stores = [sqliteStore, ...(url ? [postgresStore(url)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

type Event = Record<string, any>
type Page = { status: number; link: string | null; body: any; text: string }

for (const store of stores) {
  describe(`EPCIS events of a tenant (${store.name})`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let tokenA: string
    let pharmacyA: string
    /** Record times move on by a second per action, so a window can split them. */
    const clock = testClock(Date.now() - 3_600_000)
    const signature = 'data:image/png;base64,iVBORw0KGgo='

    beforeAll(async () => {
      api = await store.start({}, { clock })
      base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
      admin = await api.adminToken()
      pharmacyA = (await api.pharmacy(admin)).id
      const pharmacyB = (await api.pharmacy(admin)).id
      const client = await api.post('/v1/oauth/clients', admin, {
        client_name: 'partner',
        scope: 'deliveries:read',
        pharmacy_id: pharmacyA,
      })
      tokenA = await api.tokenFor(client.body.client_id, client.body.client_secret)
      const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
      const act = async (id: string, action: string, body: Record<string, unknown>) => {
        clock.advance(1_000)
        const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
        expect(res.status, res.text).toBe(200)
      }
      // Three deliveries of A (3 + 3 + 2 events) and one of B, their handoffs interleaved in time.
      const a = [0, 1, 2].map(() =>
        api.prescription(admin, { pharmacy_id: pharmacyA, items: [{ description: 'x', ndc: '0002-8215-01', quantity: 1 }] }),
      )
      const rxs = await Promise.all([...a, api.prescription(admin, { pharmacy_id: pharmacyB })])
      for (const rx of rxs) await act(rx.delivery_id, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
      for (const rx of rxs) await act(rx.delivery_id, 'pickup', { from: rx.pharmacy_id, to: driverId, signature })
      for (const rx of rxs.slice(0, 2)) await act(rx.delivery_id, 'handoff', { from: driverId, to: driver2Id, signature })
      for (const rx of rxs.slice(0, 2)) await act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })
      await act(rxs[2]!.delivery_id, 'fail', { reason: 'patient_unavailable', note: 'not home' })
      await act(rxs[2]!.delivery_id, 'return', { from: driverId, to: pharmacyA, signature })
      await act(rxs[3]!.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })
    })
    afterAll(() => api.stop())

    async function page(path: string, token = tokenA): Promise<Page> {
      const res = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } })
      const text = await res.text()
      return { status: res.status, link: res.headers.get('link'), body: JSON.parse(text), text }
    }

    /** Follows the `Link: rel="next"` of each page, checking each against GS1's schema. */
    async function allPages(first: string): Promise<{ events: Event[]; pages: number }> {
      const events: Event[] = []
      let pages = 0
      for (let next: string | null = first; next; pages++) {
        const res = await page(next)
        expect(res.status, res.text).toBe(200)
        expectValidEpcis(res.body)
        expect(res.body.type).toBe('EPCISQueryDocument')
        events.push(...res.body.epcisBody.queryResults.resultsBody.eventList)
        next = res.link ? /^<([^>]+)>; rel="next"$/.exec(res.link)![1]! : null
        expect(next === null).toBe(res.body['rxtrace:nextCursor'] === null)
      }
      return { events, pages }
    }

    it('pages every event of the tenant, in record-time order, the same events the delivery documents hold', async () => {
      const { events, pages } = await allPages('/v1/epcis/events?limit=3')
      expect(pages).toBe(3)
      expect(events).toHaveLength(8)
      const recorded = events.map((e) => e.recordTime)
      expect(recorded).toEqual([...recorded].sort())
      const deliveries = [...new Set(events.map((e) => e['rxtrace:deliveryId']))]
      expect(deliveries).toHaveLength(3)
      const fromDocuments: Event[] = []
      for (const id of deliveries) {
        const res = await page(`/v1/deliveries/${id}/epcis`)
        fromDocuments.push(...res.body.epcisBody.eventList)
      }
      const byId = (list: Event[]) => [...list].sort((x, y) => String(x.eventID).localeCompare(String(y.eventID)))
      expect(byId(events)).toEqual(byId(fromDocuments))
      expect(events.map((e) => e.bizStep).sort()).toEqual(
        ['shipping', 'shipping', 'shipping', 'transporting', 'transporting', 'dispensing', 'dispensing', 'receiving'].sort(),
      )
    })

    it('keeps to a window of record time, and one page holds it all when the limit allows', async () => {
      const { events } = await allPages('/v1/epcis/events')
      const from = events[2]!.recordTime as string
      const to = events[6]!.recordTime as string
      const res = await page(`/v1/epcis/events?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`)
      expect(res.status, res.text).toBe(200)
      expect(res.link).toBeNull()
      expect(res.body.epcisBody.queryResults.resultsBody.eventList.map((e: Event) => e.eventID)).toEqual(
        events.slice(2, 6).map((e) => e.eventID),
      )
    })

    it('shows the admin every tenant, and refuses a cursor it did not give', async () => {
      const all = await page('/v1/epcis/events', admin)
      expect(all.body.epcisBody.queryResults.resultsBody.eventList).toHaveLength(10)
      const bad = await page('/v1/epcis/events?cursor=bm90LWEtY3Vyc29y')
      expect(bad.status).toBe(422)
      expect(bad.body.errors).toEqual([expect.objectContaining({ pointer: '/query/cursor' })])
      const tooMany = await page('/v1/epcis/events?limit=10001')
      expect(tooMany.status).toBe(422)
    })
  })
}
