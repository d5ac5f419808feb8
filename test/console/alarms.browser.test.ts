import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startConsoleWorld, type ConsoleWorld, pharmacistBrowser } from './console-world.js'

// Alarms and calibrated sensors in the console, in Debian's Chromium: the queue shows each
// delivery's alarm state, the delivery page acknowledges an alarm with a note, and the excursion
// report names the sensor, its certificate and its calibration due date.

const MINUTE = 60_000
const LONG = { timeout: 20_000 }
const SENSOR = {
  serial: 'TS-4471',
  model: 'ColdProbe 3',
  accuracy_c: 0.3,
  calibrated_at: '2026-01-15T15:00:00Z',
  calibration_due: '2027-01-15T15:00:00Z',
  certificate_ref: 'DAkkS D-K-15070-01-00/2026-118',
}

let world: ConsoleWorld
let browser: Browser
let page: Page
let warm: Awaited<ReturnType<ConsoleWorld['coldDelivery']>>

beforeAll(async () => {
  world = await startConsoleWorld()
  // Refrigerated, the last 12 minutes at 9.5 °C: past the 5-minute grace, an excursion and its alarm.
  warm = await world.coldDelivery(90 * MINUTE, (t) => (Date.now() - t < 12 * MINUTE ? 9.5 : 5))
  const patched = await world.api.request('PATCH', `/v1/totes/${warm.tote.id}`, { token: world.admin, body: { sensor: SENSOR } })
  expect(patched.status, patched.text).toBe(200)
  ;({ browser, page } = await pharmacistBrowser(world.base))
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

describe('alarms in the console', () => {
  it('the queue shows the delivery’s alarm as active and not acknowledged', async () => {
    const cell = page.locator(`tr[data-delivery="${warm.deliveryId}"] .ack-slot`)
    await expect.poll(() => cell.textContent(), LONG).toBe('Alarm: Active, not acknowledged')
  })

  it('the delivery page acknowledges the alarm with a note, which the API then shows', async () => {
    await page.goto(`${world.base}/console/#/delivery/${warm.deliveryId}`)
    const alarm = page.locator('section.alarms li').first()
    await expect.poll(() => alarm.locator('.alarm-state').textContent(), LONG).toBe('Active, not acknowledged')
    await alarm.getByRole('button', { name: 'Acknowledge' }).click()
    await expect.poll(() => alarm.getByRole('alert').textContent(), LONG).toBe('A note is required.')
    await alarm.getByLabel('What you saw and did (required)').fill('Called the driver: tote lid was open, closed at 14:05')
    await alarm.getByRole('button', { name: 'Acknowledge' }).click()
    await expect
      .poll(() => page.locator('section.alarms li').first().locator('.alarm-state').textContent(), LONG)
      .toBe('Active, acknowledged')
    expect(await page.locator('section.alarms li').first().textContent()).toContain('Called the driver: tote lid was open, closed at 14:05')
    expect(await page.locator('section.alarms li').first().textContent()).toContain('Pat Pharmacist')
    const alarms = (await world.api.get(`/v1/alarms?delivery_id=${warm.deliveryId}`, world.admin)).body.data
    expect(alarms).toEqual([
      expect.objectContaining({
        state: 'ACTIVE_ACK',
        acknowledged_by: world.user.id,
        note: 'Called the driver: tote lid was open, closed at 14:05',
      }),
    ])
  })

  it('the excursion report names the sensor, its calibration certificate and its due date', async () => {
    await page.goto(`${world.base}/console/#/print/${warm.deliveryId}`)
    const facts = page.locator('section.facts').first()
    await expect.poll(() => facts.textContent(), LONG).toContain('sensor TS-4471, ColdProbe 3, ±0.3 °C')
    const text = (await facts.textContent())!
    expect(text).toContain('DAkkS D-K-15070-01-00/2026-118')
    // 15:00 UTC on 15 January 2027 is 09:00 in Chicago.
    expect(text).toMatch(/calibration due .*Jan(uary)? 15, 2027.*9:00/)
  })
})
