import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pharmacistBrowser, startConsoleWorld, type ConsoleWorld } from './console-world.js'

// Issue 26 point 6, in Debian's Chromium: while a delivery is on its way the console shows where its
// driver was last seen — how long ago and how far from the address — in the queue row, and on the
// delivery's page with a link to the coordinates on openstreetmap.org; nothing once none is in progress.

const MINUTE = 60_000
const LONG = { timeout: 20_000 }
const DOOR = { lat: 41.8781, lng: -87.6298 }
/** One degree of latitude in metres, on the sphere the service measures on. */
const METRES_PER_DEGREE = (Math.PI / 180) * 6_371_008.8

let world: ConsoleWorld
let browser: Browser
let page: Page
let moving: string
let waiting: string
const requests: string[] = []

beforeAll(async () => {
  world = await startConsoleWorld()
  const { api, admin, pharmacy, fleet, user } = world
  const rx = await api.prescription(admin, {
    pharmacy_id: pharmacy.id,
    cold_chain: false,
    patient_id: 'pt_8080',
    items: [{ description: 'Amoxicillin 500 mg capsule', quantity: 21 }],
    delivery_address: { line1: '1 Patient Way', ...DOOR },
  })
  moving = rx.delivery_id
  expect((await api.post(`/v1/deliveries/${moving}/dispatch`, admin, { fleet_id: fleet.fleetId, driver_id: fleet.driverId })).status).toBe(
    200,
  )
  const picked = await api.post(`/v1/deliveries/${moving}/pickup`, admin, {
    from: user.id,
    to: fleet.driverId,
    signature: 'data:image/png;base64,iVBORw0KGgo=',
  })
  expect(picked.status, picked.text).toBe(200)
  // The driver 1.2 km north of the door two minutes ago, having been farther before.
  const north = (metres: number, agoMs: number) => ({
    lat: DOOR.lat + metres / METRES_PER_DEGREE,
    lng: DOOR.lng,
    accuracy_m: 8,
    at: new Date(Date.now() - agoMs).toISOString(),
  })
  const posted = await api.post(`/v1/drivers/${fleet.driverId}/locations`, admin, {
    positions: [north(3_000, 6 * MINUTE), north(1_200, 2 * MINUTE)],
  })
  expect(posted.status, posted.text).toBe(200)
  waiting = (await api.prescription(admin, { pharmacy_id: pharmacy.id, cold_chain: false })).delivery_id
  ;({ browser, page } = await pharmacistBrowser(world.base))
  page.on('request', (r) => requests.push(new URL(r.url()).pathname + new URL(r.url()).search))
  // The queue's first page was asked for while signing in, before the listener: load it again, listened to.
  await page.reload()
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

const row = (deliveryId: string) => page.locator(`table.queue tbody tr[data-delivery="${deliveryId}"]`)

describe("the driver's last position", () => {
  it('shows in the queue row, how long ago and how far from the address, with the page of rows', async () => {
    await expect.poll(() => row(moving).count(), LONG).toBe(1)
    const driver = (await row(moving).locator('td.driver').innerText()).replace(/\s+/g, ' ')
    expect(driver).toMatch(/^Dana Driver seen \d min ago, 1\.2 km away$/)
    expect(await row(waiting).locator('.last-seen').count()).toBe(0)
    expect(requests.some((r) => r.startsWith('/v1/deliveries?') && r.includes('last_position'))).toBe(true)
    expect(requests.filter((r) => r.includes('/locations'))).toEqual([]) // never a request per row
  })

  it('shows on the delivery page with a link to the coordinates on openstreetmap.org', async () => {
    await row(moving).getByRole('link').first().click()
    const seen = page.locator('.facts .last-seen')
    await expect.poll(() => seen.count(), LONG).toBe(1)
    const text = await seen.innerText()
    expect(text).toMatch(/^Dana Driver — seen \d min ago, 1\.2 km from the address \(.+ C[SD]T\) · 41\.88889, -87\.62980$/)
    const link = seen.getByRole('link', { name: 'Last position of Dana Driver on a map (opens a new tab)' })
    const href = (await link.getAttribute('href'))!
    expect(href).toMatch(/^https:\/\/www\.openstreetmap\.org\/\?mlat=41\.8888\d*&mlon=-87\.6298#map=17\/41\.8888\d*\/-87\.6298$/)
    expect(await link.getAttribute('target')).toBe('_blank')
    expect(requests).toContain(`/v1/deliveries/${moving}/locations?order=desc&limit=1`)
  })

  it('is not shown for a delivery not yet on its way', async () => {
    await page.goto(`${world.base}/console/#/delivery/${waiting}`)
    await expect.poll(() => page.locator('main[data-ready="true"] h1').innerText(), LONG).toContain(waiting)
    expect(await page.locator('.facts .last-seen').count()).toBe(0)
    expect(requests.some((r) => r.startsWith(`/v1/deliveries/${waiting}/locations`))).toBe(false)
  })
})
