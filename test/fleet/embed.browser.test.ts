import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import axe from '../console/axe.js'
import { launchChromium, seedQueue, startConsoleWorld, type ConsoleWorld } from '../console/console-world.js'

// The fleet's embedded dashboard as a dispatcher reads it, in Debian's Chromium: driver and pharmacy
// by name, times in the fleet's own zone with their age, and states told apart by colour and by words.

let world: ConsoleWorld
let browser: Browser
let page: Page
let scene: Awaited<ReturnType<typeof seedQueue>>

beforeAll(async () => {
  world = await startConsoleWorld()
  const zone = await world.api.request('PATCH', `/v1/fleets/${world.fleet.fleetId}`, {
    token: world.admin,
    body: { timezone: 'America/Chicago' },
  })
  expect(zone.status, zone.text).toBe(200)
  scene = await seedQueue(world)
  const session = await world.api.post(`/v1/fleets/${world.fleet.fleetId}/embed-sessions`, world.admin, { ttl_s: 600 })
  expect(session.status, session.text).toBe(201)
  browser = await launchChromium()
  // The dispatcher's own computer is elsewhere: the page must use the fleet's zone, not the browser's.
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, timezoneId: 'Asia/Tokyo', locale: 'en-US' })
  page = await context.newPage()
  await page.goto(session.body.url)
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

const rowOf = (deliveryId: string) => page.locator('tr', { hasText: deliveryId })

describe('the embedded fleet dashboard', () => {
  it('names the pharmacy and the driver, and says how long ago the chain broke, in the fleet’s local time', async () => {
    const broken = rowOf(scene.broken.deliveryId).first()
    await expect.poll(() => broken.count()).toBe(1)
    const text = (await broken.innerText()).replace(/\s+/g, ' ')
    expect(text).toContain('Lakeside Pharmacy')
    expect(text).toContain('Dana Driver')
    expect(text).toContain('Insulin glargine 100 U/mL pen') // what is carried, by name
    expect(text).toMatch(/broken (\d+ min|\d+ h \d+ min) ago/)
    // Broken about 80 minutes ago (the freeze began 100 minutes into a 3-hour trip): local wall time in Chicago.
    const since = (await world.api.get(`/v1/deliveries/${scene.broken.deliveryId}`, world.admin)).body.cold_chain.broken_at as string
    const chicago = new Intl.DateTimeFormat('en-US', { timeZone: 'America/Chicago', hour: '2-digit', minute: '2-digit' }).format(
      new Date(since),
    )
    expect(text).toContain(chicago)
    expect(text).toMatch(/C[SD]T/)
    expect(await page.locator('#zone').innerText()).toBe('America/Chicago')
    expect(await page.locator('#counts').innerText()).toMatch(/Picked up: \d+/) // statuses in words, not PICKED_UP
  })

  it('colours rows and badges by state, with words and symbols too, at accessible contrast', async () => {
    const badge = (deliveryId: string) => rowOf(deliveryId).last().locator('.badge')
    const brokenBadge = badge(scene.broken.deliveryId)
    const fineBadge = badge(scene.fine.deliveryId)
    const excursionBadge = badge(scene.excursion.deliveryId)
    expect(await brokenBadge.innerText()).toContain('Broken')
    expect(await excursionBadge.innerText()).toContain('Excursion')
    expect(await fineBadge.innerText()).toContain('OK')
    const colours = await Promise.all(
      [brokenBadge, excursionBadge, fineBadge].map((b) => b.evaluate((el) => getComputedStyle(el).backgroundColor)),
    )
    expect(new Set(colours).size).toBe(3)
    const violations = (await axe(page)).filter((v) => v.id === 'color-contrast')
    expect(violations).toEqual([])
  })
})
