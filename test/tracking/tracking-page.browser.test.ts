import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import axe from '../console/axe.js'
import { launchChromium } from '../console/console-world.js'
import { phonePage, startTrackingScene, type TrackingScene } from './tracking-scene.js'

// The patient's tracking page on a phone, in Debian's Chromium: what the patient reads, and
// nothing of the prescription, the address or the ids behind it.

let scene: TrackingScene
let browser: Browser
let page: Page

beforeAll(async () => {
  scene = await startTrackingScene()
  browser = await launchChromium()
  page = await phonePage(browser)
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await scene?.stop()
})

describe('the tracking page on a phone', () => {
  it('reads as the patient needs it: where the delivery is, when, who brings it, whom to call', async () => {
    const res = await page.goto(scene.url)
    expect(res?.status()).toBe(200)
    expect(await page.getByRole('heading', { level: 1 }).innerText()).toBe('Your delivery is on its way')
    expect(await page.locator('#pharmacy').innerText()).toBe('Lakeside Pharmacy')
    expect(await page.locator('#driver').innerText()).toBe('Dana')
    // The pharmacy's wall time (Chicago), not the phone's (Tokyo).
    const chicago = new Intl.DateTimeFormat('en-US', { timeZone: 'America/Chicago', hour: 'numeric', minute: '2-digit' }).format(
      new Date(scene.eta),
    )
    const eta = await page.locator('#eta').innerText()
    expect(eta).toContain(chicago)
    expect(eta).toMatch(/C[SD]T/)
    expect(eta).toMatch(/in about 2\d min/)
    const call = page.getByRole('link', { name: 'Call +13125550142' })
    expect(await call.getAttribute('href')).toBe('tel:+13125550142')
  })

  it('shows nothing else of the delivery', async () => {
    const text = await page.locator('body').innerText()
    for (const hidden of [
      'pt_browser_7781',
      'Evergreen',
      'Insulin',
      scene.deliveryId,
      'Dana Driver',
      'Speedy',
      'dl_',
      'dr_',
      'ph_',
      'rx_',
    ]) {
      expect(text).not.toContain(hidden)
    }
    expect(await page.locator('script').count()).toBe(0)
    expect(await page.locator('img, iframe').count()).toBe(0)
  })

  it('fits the phone’s width and passes the WCAG 2.1 AA checks', async () => {
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth)
    expect(overflow).toBeLessThanOrEqual(0)
    expect(await axe(page)).toEqual([])
  })

  it('an altered link shows the neutral sentence and nothing of the delivery', async () => {
    const altered = scene.url.replace(/.{4}$/, 'AAAA')
    const res = await page.goto(altered)
    expect(res?.status()).toBe(404)
    const text = (await page.locator('body').innerText()).replace(/\s+/g, ' ').trim()
    expect(text).toBe('This tracking link is not available If you are expecting a delivery, please contact your pharmacy.')
  })
})
