import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signedInPerson } from '../helpers/users.js'
import { startConsoleWorld, type ConsoleWorld, pharmacistBrowser } from './console-world.js'

// The stability budget a pharmacist reads beside the chart, and on the printable excursion report:
// a bar per band with its figures, the verdict, freeze-thaw and an assessment in force. Debian's Chromium.

const MINUTE = 60_000
const LONG = { timeout: 20_000 }
const NDC = '00088-2220-33'

let world: ConsoleWorld
let browser: Browser
let page: Page
let deliveryId: string
let assessmentId: string

beforeAll(async () => {
  world = await startConsoleWorld()
  // Registered before the prescription (created an hour ago): its version is the one in force then.
  world.clock.shift(-2 * 60 * MINUTE)
  const product = await world.api.post('/v1/products', world.admin, {
    ndc: NDC,
    name: 'Insulin glargine',
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
  expect(product.status, product.text).toBe(201)
  world.clock.shift(0)
  // 30 minutes at 9.5 °C in an hour of readings: half the hour above 8 °C used.
  const d = await world.coldDelivery(60 * MINUTE, (t, start) => ((t - start) / MINUTE >= 10 && (t - start) / MINUTE < 40 ? 9.5 : 4.5))
  deliveryId = d.deliveryId
  const pharmacist = await signedInPerson(world.api, world.admin, { role: 'pharmacist', pharmacy_id: world.pharmacy.id })
  const assessed = await world.api.post(
    `/v1/deliveries/${deliveryId}/assessments`,
    pharmacist.token,
    {
      ndc: NDC,
      band: 0,
      add_back_s: 1800,
      justification: 'Manufacturer letter: 30 min more',
      signature: { meaning: 'assessed', password: pharmacist.password },
    },
    { 'idempotency-key': 'budget-console' },
  )
  expect(assessed.status, assessed.text).toBe(201)
  assessmentId = assessed.body.id
  ;({ browser, page } = await pharmacistBrowser(world.base))
  // Signed in, the console lands on the queue: navigate only once it has, or the landing wins.
  await page.locator('table.queue').waitFor(LONG)
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

describe('the stability budget on the delivery page', () => {
  it('shows a bar per band beside the chart with what is used, given back and left, the verdict and freeze-thaw', async () => {
    const ledger = (await world.api.get(`/v1/deliveries/${deliveryId}`, world.admin)).body.stability
    const warm = ledger.items[0].bands[0]
    expect(warm.consumed_s).toBeGreaterThan(0)
    await page.goto(`${world.base}/console/#/delivery/${deliveryId}`)
    await page.locator('main[data-ready="true"] section.budget').waitFor(LONG)
    const budget = page.locator('section.budget')
    expect(await budget.locator('h2').textContent()).toBe('Stability budget')
    const bars = budget.locator('[role="meter"]')
    expect(await bars.count()).toBe(2)
    const used = Math.round((warm.consumed_s / (3600 + 1800)) * 100)
    expect(await bars.first().getAttribute('aria-valuenow')).toBe(String(used))
    // The bar is drawn at that share of its width (and the empty cold band shows empty).
    const drawn = await bars.evaluateAll((els) =>
      els.map((el) => el.querySelector('.bar-fill')!.getBoundingClientRect().width / el.getBoundingClientRect().width),
    )
    expect(drawn[0]).toBeCloseTo(used / 100, 1)
    expect(drawn[1]).toBe(0)
    expect(await bars.first().getAttribute('aria-valuetext')).toMatch(/used of 1 h 30 min \(30 min given back\), .* left/)
    expect(await budget.textContent()).toContain('Within budget')
    expect(await budget.textContent()).toContain('Freeze-thaw cycles: 0 of 0 allowed')
    expect(await budget.locator('.assessment').textContent()).toContain(
      `Assessment ${assessmentId}: +30 min — Manufacturer letter: 30 min more`,
    )
    // Signed (21 CFR 11.50): the pharmacist's printed name, the time with its zone, the meaning.
    expect(await budget.locator('.assessment .signature').textContent()).toMatch(
      /^ Signed by A pharmacist on \w{3} \d{2}, \d{4}, .+ [A-Z]{3,4} — meaning: Assessed$/,
    )
    // Beside the chart: the same row, to its right.
    const chart = (await page.locator('section.trace').boundingBox())!
    const box = (await budget.boundingBox())!
    expect(box.x).toBeGreaterThan(chart.x + chart.width - 1)
    expect(box.y).toBeLessThan(chart.y + chart.height)
  })

  it('prints the ledger on the excursion report', async () => {
    await page.goto(`${world.base}/console/#/print/${deliveryId}`)
    await page.locator('main[data-ready="true"] article.report').waitFor(LONG)
    await page.emulateMedia({ media: 'print' })
    const budget = page.locator('article.report section.budget')
    expect(await budget.isVisible()).toBe(true)
    expect(await budget.locator('[role="meter"]').count()).toBe(2)
    expect(await budget.textContent()).toMatch(/Within budget.*8 to 25 °C.*used of 1 h 30 min/)
    expect(await budget.locator('.assessment').textContent()).toMatch(/Signed by A pharmacist on .+ — meaning: Assessed/)
    await page.emulateMedia({ media: 'screen' })
  })
})
