/**
 * `npm run screenshots:console` — the PNGs of docs/console.md, taken in headless Chromium
 * (1280×800) from a service seeded with the usual scene: a broken, an excursion, a fine and an
 * unmonitored delivery. Writes docs/console/*.png, the fleet's embedded dashboard (docs/fleet.md)
 * as docs/console/embed.png, and the patient's tracking page (docs/api.md) as docs/console/tracking-page.png.
 */
import { mkdirSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { launchChromium, seedQueue, signInToConsole, startConsoleWorld } from '../../test/console/console-world.js'
import { trackingPageScreenshot } from '../../test/tracking/tracking-screenshot.js'

const OUT = fileURLToPath(new URL('../../docs/console/', import.meta.url))
mkdirSync(OUT, { recursive: true })

const world = await startConsoleWorld()
const browser = await launchChromium()
try {
  const scene = await seedQueue(world)
  // The driver's newest position (posted a minute ago), shown beside each delivery they carry.
  const posted = await world.api.post(`/v1/drivers/${world.fleet.driverId}/locations`, world.admin, {
    positions: [{ lat: 41.889, lng: -87.6298, accuracy_m: 8, at: new Date(Date.now() - 60_000).toISOString() }],
  })
  if (posted.status !== 200) throw new Error(`positions: ${posted.status} ${posted.text}`)
  // The fleet's embedded dashboard, in its own zone, before any decision is taken.
  await world.api.request('PATCH', `/v1/fleets/${world.fleet.fleetId}`, { token: world.admin, body: { timezone: 'America/Chicago' } })
  const embed = await world.api.post(`/v1/fleets/${world.fleet.fleetId}/embed-sessions`, world.admin, { ttl_s: 600 })
  const embedPage = await (await browser.newContext({ viewport: { width: 1100, height: 700 }, locale: 'en-US' })).newPage()
  await embedPage.goto(embed.body.url)
  await embedPage.locator('#exceptions tr').first().waitFor()
  await embedPage.screenshot({ path: `${OUT}embed.png`, fullPage: true })
  await embedPage.context().close()
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } })
  const page = await context.newPage()
  await page.goto(`${world.base}/console/`)
  await page.getByLabel('Email').waitFor()
  await page.screenshot({ path: `${OUT}sign-in.png` })
  await signInToConsole(page, world.base)
  await page.locator('table.queue tbody tr').nth(3).waitFor()
  await page.screenshot({ path: `${OUT}queue.png`, fullPage: true })
  const open = async (hash: string) => {
    // The previous page's "ready" must not pass for this one's.
    await page.evaluate(() => document.querySelector('main')?.removeAttribute('data-ready'))
    await page.goto(`${world.base}/console/${hash}`)
    await page.locator('main[data-ready="true"]').waitFor()
  }
  await open(`#/delivery/${scene.broken.deliveryId}`)
  await page.screenshot({ path: `${OUT}delivery-broken.png`, fullPage: true })
  await page.locator('figure.chart .u-over').hover({ position: { x: 400, y: 150 } })
  await page.locator('figure.chart').screenshot({ path: `${OUT}chart-hover.png` })
  await open(`#/delivery/${scene.excursion.deliveryId}`)
  await page.screenshot({ path: `${OUT}delivery-excursion.png`, fullPage: true })
  await open(`#/delivery/${scene.broken.deliveryId}`)
  await page.getByLabel('Return: the goods come back').check()
  await page.getByLabel('Note (required)').fill('Frozen insulin: destroy and re-dispense.')
  await page.getByLabel('Meaning of your signature').selectOption('returned')
  await page.getByLabel('Your password (to sign)').fill(world.password)
  await page.locator('section.disposition').screenshot({ path: `${OUT}disposition-form.png` })
  await page.getByRole('button', { name: 'Sign and record decision' }).click()
  await page.locator('.decided').waitFor()
  await page.locator('section.disposition').screenshot({ path: `${OUT}disposition-decided.png` })
  await world.service.db
    .updateTable('custody_events')
    .set({ to_party: 'dr_someoneelse' })
    .where('delivery_id', '=', scene.fine.deliveryId)
    .where('seq', '=', 3)
    .execute()
  await open(`#/delivery/${scene.fine.deliveryId}`)
  await page.locator('section.custody').screenshot({ path: `${OUT}custody-tampered.png` })
  await open(`#/print/${scene.broken.deliveryId}`)
  await page.emulateMedia({ media: 'print' })
  await page.screenshot({ path: `${OUT}print-report.png`, fullPage: true })
  await page.pdf({ path: `${OUT}excursion-report.pdf`, format: 'A4', printBackground: true })
  await page.emulateMedia({ media: 'screen' })
  // The stability budget beside the chart: a delivery whose item names a product (registered
  // before the prescription, so its version is the one in force), half its warm budget used.
  world.clock.shift(-3 * 3_600_000)
  await world.api.post('/v1/products', world.admin, {
    ndc: '00088-2220-33',
    name: 'Insulin glargine 100 U/mL pen',
    pharmacy_id: world.pharmacy.id,
    stability: {
      storage: { min_c: 2, max_c: 8 },
      budgets: [
        { min_c: 8, max_c: 25, allowed_s: 3600 },
        { min_c: 0, max_c: 2, allowed_s: 1800 },
      ],
      freeze_thaw_max: 0,
      source: 'Prescribing information 16.2',
    },
  })
  world.clock.shift(0)
  const budgeted = await world.coldDelivery(60 * 60_000, (t, start) =>
    (t - start) / 60_000 >= 10 && (t - start) / 60_000 < 40 ? 9.5 : 4.5,
  )
  await open(`#/delivery/${budgeted.deliveryId}`)
  await page.locator('.trace-row').screenshot({ path: `${OUT}stability-budget.png` })
  await context.close()
  // A tablet, portrait.
  const tablet = await (await browser.newContext({ viewport: { width: 820, height: 1180 } })).newPage()
  await signInToConsole(tablet, world.base)
  await tablet.locator('table.queue tbody tr').nth(3).waitFor()
  await tablet.screenshot({ path: `${OUT}queue-tablet.png` })
  await trackingPageScreenshot(browser, `${OUT}tracking-page.png`)
  process.stdout.write(`screenshots written to ${OUT}\n`)
} finally {
  await browser.close()
  await world.stop()
}
