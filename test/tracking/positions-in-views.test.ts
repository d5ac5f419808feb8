import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { launchChromium } from '../console/console-world.js'
import { MINUTE } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * The driver's positions as the views show them: the fleet's embed says where the driver was
 * last seen (how long ago, how far from the door), the patient's page shows the live ETA, and a
 * pharmacy that opted in gets `patient.notify` `arriving` once the driver is within 500 m.
 */

const { url: pgUrl, reasons } = await reachablePostgres()
if (!pgUrl && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const DOOR = { lat: 39.7817, lng: -89.6501 }
// Metres due north of the door (a degree of latitude is 111,195 m on the IUGG sphere).
const north = (m: number) => ({ lat: DOOR.lat + m / 111_195, lng: DOOR.lng })

function describeViews(store: StoreUnderTest, browserToo: boolean) {
  describe(`positions in the views on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let deliveryId: string
    let fleetId: string
    let driverId: string
    let trackingUrl: string

    beforeAll(async () => {
      api = await store.start()
      base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
      admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin, { name: 'Lakeside Pharmacy', phone: '+13125550142', patient_notify: true })
      ;({ fleetId, driverId } = await api.fleetWithDriver(admin))
      deliveryId = (
        await api.prescription(admin, {
          pharmacy_id: pharmacy.id,
          deliver_by: new Date(Date.now() + 3 * 60 * MINUTE).toISOString(),
          delivery_address: { line1: '742 Evergreen Terrace', city: 'Springfield', ...DOOR },
        })
      ).delivery_id
      for (const [action, body] of [
        ['dispatch', { fleet_id: fleetId, driver_id: driverId }],
        ['pickup', { from: pharmacy.id, to: driverId, signature: 'sig' }],
      ] as const)
        expect((await api.post(`/v1/deliveries/${deliveryId}/${action}`, admin, body)).status).toBe(200)
      const seen = new Date(Date.now() - 2 * MINUTE).toISOString()
      const posted = await api.post(`/v1/drivers/${driverId}/locations`, admin, {
        positions: [{ ...north(1_200), accuracy_m: 8, at: seen }],
      })
      expect(posted.status, posted.text).toBe(200)
      trackingUrl = (await api.post(`/v1/deliveries/${deliveryId}/tracking-links`, admin)).body.url.replace('http://rxtrace.test', base)
    }, 60_000)

    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })

    it('the fleet’s live view says where the driver was last seen and how far from the door, never the address', async () => {
      const session = await api.post(`/v1/fleets/${fleetId}/embed-sessions`, admin, { ttl_s: 120 })
      const data = await fetch(`${base}/embed/dashboard/data${new URL(session.body.url).search}`)
      const view = (await data.json()) as any
      const item = view.in_progress.items.find((i: any) => i.delivery_id === deliveryId)
      expect(item.last_position).toMatchObject({ lat: north(1_200).lat, lng: DOOR.lng, accuracy_m: 8 })
      expect(Math.abs(item.last_position.distance_m - 1_200)).toBeLessThan(5)
      expect(JSON.stringify(view)).not.toContain('Evergreen')
    })

    it('the patient’s page shows the live ETA the positions gave, in the pharmacy’s time', async () => {
      const eta = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.eta as string
      const chicago = new Intl.DateTimeFormat('en-US', { timeZone: 'America/Chicago', hour: 'numeric', minute: '2-digit' }).format(
        new Date(eta),
      )
      const page = await (await fetch(trackingUrl)).text()
      expect(page).toContain(chicago)
      // 1.2 km at the default 25 km/h is under 3 minutes: the page no longer shows the 3-hour promise.
      expect(page).toMatch(/any minute now|in about \d min|running a little late/)
    })

    it('a pharmacy that opted in gets patient.notify arriving once the driver is within 500 m, with a working link', async () => {
      const near = await api.post(`/v1/drivers/${driverId}/locations`, admin, {
        positions: [{ ...north(300), accuracy_m: 8, at: new Date().toISOString() }],
      })
      expect(near.status, near.text).toBe(200)
      const written = await api.service.db
        .selectFrom('events')
        .select(['type', 'data', 'fleet_id'])
        .where('delivery_id', '=', deliveryId)
        .where('type', '=', 'patient.notify')
        .execute()
      const arriving = written.map((e) => ({ ...e, data: JSON.parse(e.data) })).filter((e) => e.data.kind === 'arriving')
      expect(arriving).toHaveLength(1)
      expect(arriving[0]!.fleet_id).toBeNull()
      expect((await fetch(arriving[0]!.data.tracking_url.replace('http://rxtrace.test', base))).status).toBe(200)
    })

    if (browserToo)
      it('the embedded page says it in words, with the coordinates as a link and no map loaded', async () => {
        const browser: Browser = await launchChromium()
        try {
          const session = await api.post(`/v1/fleets/${fleetId}/embed-sessions`, admin, { ttl_s: 120 })
          const page = await (await browser.newContext({ viewport: { width: 1100, height: 700 }, locale: 'en-US' })).newPage()
          const fetched: string[] = []
          page.on('request', (r) => fetched.push(r.url()))
          await page.goto(session.body.url.replace('http://rxtrace.test', base))
          const cell = page.locator('#progress tr', { hasText: deliveryId }).locator('td').nth(2)
          const text = (await cell.innerText()).replace(/\s+/g, ' ')
          expect(text).toContain('Dana Driver')
          expect(text).toMatch(/seen \d+ (s|min) ago, (\d+ m|\d\.\d km) away/)
          const link = cell.getByRole('link')
          expect(await link.getAttribute('href')).toContain(`mlat=${north(300).lat}`)
          expect(fetched.every((u) => u.startsWith(base))).toBe(true)
        } finally {
          await browser.close()
        }
      }, 60_000)
  })
}

describeViews(sqliteStore, true)
if (pgUrl) describeViews(postgresStore(pgUrl), false)
