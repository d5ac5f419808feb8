import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startConsoleWorld, type ConsoleWorld, pharmacistBrowser } from './console-world.js'

// What a pharmacist reads off the console, checked in Debian's Chromium: the queue's date
// filter; the chart's hover readout, allowed band, a sensor gap shown as unknown (never a line
// across it) and its "as of" time; the summary; the printable excursion report; and the layout
// on a tablet. One world, one browser, one signed-in page for the file (browser tests are costly).

const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE
const LONG = { timeout: 20_000 }

let world: ConsoleWorld
let browser: Browser
let page: Page
let gappy: Awaited<ReturnType<ConsoleWorld['coldDelivery']>>
let old: { delivery_id: string; created_at: string }
let recent: { delivery_id: string; created_at: string }
/** Created at 23:30 on 1 November 2026 in Chicago: the day clocks went back, 25 hours long. */
let lateOnLongDay: { delivery_id: string; created_at: string }
const LONG_DAY = '2026-11-01'
/** Minutes after the tote's start: 4.5 °C, silent for 40 min, 4.5 °C, 15 min at 9.5 °C, 4.5 °C again. */
const GAP = { from: 30, to: 70 }
const WARM = { from: 80, to: 95 }

beforeAll(async () => {
  world = await startConsoleWorld()
  world.clock.shift(-3 * DAY)
  old = (await world.api.prescription(world.admin, { pharmacy_id: world.pharmacy.id })) as unknown as typeof old
  world.clock.shift(Date.parse('2026-11-02T05:30:00Z') - Date.now())
  lateOnLongDay = (await world.api.prescription(world.admin, { pharmacy_id: world.pharmacy.id })) as unknown as typeof lateOnLongDay
  world.clock.shift(0)
  recent = (await world.api.prescription(world.admin, { pharmacy_id: world.pharmacy.id })) as unknown as typeof recent
  gappy = await world.coldDelivery(2 * 60 * MINUTE, (t, start) => {
    const m = (t - start) / MINUTE
    if (m >= GAP.from && m < GAP.to) return null
    return m >= WARM.from && m < WARM.to ? 9.5 : 4.5
  })
  ;({ browser, page } = await pharmacistBrowser(world.base))
}, 120_000)

afterAll(async () => {
  await browser?.close()
  await world?.stop()
})

const shownIds = () => page.locator('table.queue tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-delivery')))

/** The browser's calendar day of an instant, as a date input takes it (YYYY-MM-DD). */
const localDay = (iso: string, plusDays = 0) =>
  page.evaluate(
    ([at, plus]) => {
      const d = new Date(Date.parse(at as string) + (plus as number) * 86_400_000)
      return `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`
    },
    [iso, plusDays],
  )

/** A column of the chart's canvas at `minute` after the tote's start: its pixels top to bottom, and the y scale of the plot area. */
async function column(minute: number) {
  const trace = (await world.api.get(`/v1/deliveries/${gappy.deliveryId}/temperature?step=2s`, world.admin)).body
  const from = Date.parse(trace.from)
  const asOf = Date.parse(trace.summary.as_of ?? trace.to)
  const start = Date.parse(
    (await world.api.get(`/v1/deliveries/${gappy.deliveryId}`, world.admin)).body.custody.find(
      (e: { type: string }) => e.type === 'picked_up',
    ).occurred_at,
  )
  const fraction = (start + minute * MINUTE - from) / (asOf - from)
  return page.locator('figure.chart').evaluate((figure, f) => {
    const canvas = figure.querySelector('canvas')!
    const over = figure.querySelector('.u-over')!.getBoundingClientRect()
    const box = canvas.getBoundingClientRect()
    const scale = canvas.width / box.width
    const x = Math.round((over.left - box.left + f * over.width) * scale)
    const top = Math.round((over.top - box.top) * scale)
    const height = Math.round(over.height * scale)
    const data = canvas.getContext('2d')!.getImageData(x, top, 1, height).data
    const pixels: [number, number, number, number][] = []
    for (let i = 0; i < data.length; i += 4) pixels.push([data[i]!, data[i + 1]!, data[i + 2]!, data[i + 3]!])
    return { pixels, clientX: over.left + f * over.width, clientY: over.top + over.height / 2 }
  }, fraction)
}

// Colours as drawn on the transparent canvas (console/src/chart.ts): the allowed band is a light
// green wash, the average a dark blue line, a gap a grey wash.
const isBand = ([r, g, b, a]: number[]) => a! > 15 && a! < 60 && g! > r! + 40 && g! > b! + 40
const isAverageLine = ([r, g, b, a]: number[]) => a! > 120 && b! > 100 && b! > r! + 60 && b! > g! + 30
const isGrey = ([r, g, b, a]: number[]) => a! > 30 && Math.abs(r! - b!) < 25 && g! - r! < 45 && r! < 140

describe('the attention queue', () => {
  it('filters by the day the prescription was created', async () => {
    await expect.poll(() => page.locator('table.queue tbody tr').count(), LONG).toBe(4)
    await page.getByLabel('Created from').fill(await localDay(old.created_at, 1))
    await expect.poll(async () => new Set(await shownIds()), LONG).toEqual(new Set([recent.delivery_id, gappy.deliveryId]))
    await page.getByLabel('Created from').fill('')
    await page.getByLabel('Created to').fill(await localDay(old.created_at))
    // "to" includes its whole day.
    await expect.poll(async () => new Set(await shownIds()), LONG).toEqual(new Set([old.delivery_id, lateOnLongDay.delivery_id]))
    await page.getByLabel('Created to').fill('')
    await expect.poll(() => page.locator('table.queue tbody tr').count(), LONG).toBe(4)
  })

  it('counts a 25-hour day whole: the last hour of the day the clocks went back is in it', async () => {
    expect(await localDay(lateOnLongDay.created_at)).toBe(LONG_DAY)
    await page.getByLabel('Created from').fill(LONG_DAY)
    await page.getByLabel('Created to').fill(LONG_DAY)
    await expect.poll(shownIds, LONG).toEqual([lateOnLongDay.delivery_id])
    await page.getByLabel('Created from').fill('')
    await page.getByLabel('Created to').fill('')
    await expect.poll(() => page.locator('table.queue tbody tr').count(), LONG).toBe(4)
  })
})

describe('a delivery page', () => {
  beforeAll(async () => {
    await page.goto(`${world.base}/console/#/delivery/${gappy.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
  })

  it('reads out the temperature and the time under the pointer', async () => {
    for (const [minute, expected] of [
      [15, '4.5 °C'],
      [(WARM.from + WARM.to) / 2, '9.5 °C'],
    ] as const) {
      const { clientX, clientY } = await column(minute)
      await page.mouse.move(clientX, clientY)
      const average = page.locator('.u-legend tr', { hasText: 'Average' }).locator('.u-value')
      await expect.poll(() => average.textContent()).toBe(expected)
      const time = await page.locator('.u-legend tr', { hasText: 'Time' }).locator('.u-value').textContent()
      expect(time).toMatch(/C[SD]T$/) // in the pharmacy's time zone (Chicago)
    }
  })

  it('draws the allowed band from 2 to 8 °C behind the readings, and the excursion above it', async () => {
    const fine = (await column(15)).pixels
    const bandRows = fine.map((p, y) => (isBand(p) ? y : -1)).filter((y) => y >= 0)
    expect(bandRows.length, 'a green band in a quiet column').toBeGreaterThan(20)
    const [bandTop, bandBottom] = [Math.min(...bandRows), Math.max(...bandRows)]
    // Where 4.5 °C falls between the band's edges (8 °C at the top, 2 °C at the bottom).
    const at = (rows: number[]) => (bandBottom - rows.reduce((a, b) => a + b, 0) / rows.length) / (bandBottom - bandTop)
    const line = fine.map((p, y) => (isAverageLine(p) ? y : -1)).filter((y) => y >= 0)
    expect(line.length, 'the average line crosses the column').toBeGreaterThan(0)
    expect(at(line)).toBeCloseTo((4.5 - 2) / (8 - 2), 1)
    const warm = (await column((WARM.from + WARM.to) / 2)).pixels
    const warmLine = warm.map((p, y) => (isAverageLine(p) ? y : -1)).filter((y) => y >= 0)
    expect(warmLine.length).toBeGreaterThan(0)
    expect(at(warmLine)).toBeCloseTo((9.5 - 2) / (8 - 2), 1) // above the band
  })

  it('shades the sensor gap grey as unknown and draws no line across it', async () => {
    const gap = (await column((GAP.from + GAP.to) / 2 + 5)).pixels
    expect(gap.filter(isAverageLine), 'no line through the silence').toHaveLength(0)
    expect(gap.filter(isGrey).length, 'a grey wash over the whole height').toBeGreaterThan(gap.length / 2)
    expect(Number(await page.locator('figure.chart').getAttribute('data-unknown'))).toBeGreaterThanOrEqual(1)
    expect(await page.locator('figure.chart li.span-unknown').first().textContent()).toMatch(/^no signal: .* for \d+ min$/)
  })

  it('says as of when the chart and the summary were computed, in the pharmacy time zone, and the summary agrees with the API', async () => {
    const asOf = await page.locator('figure.chart .as-of').textContent()
    expect(asOf).toMatch(/^As of \w{3} \d{2}, \d{4}, \d{2}:\d{2}:\d{2} [AP]M C[SD]T$/)
    const summary = page.locator('section.summary')
    const value = (label: string) => summary.locator('dt', { hasText: label }).locator('xpath=following-sibling::dd[1]').textContent()
    expect(`As of ${await value('As of')}`).toBe(asOf)
    const trace = (await world.api.get(`/v1/deliveries/${gappy.deliveryId}/temperature`, world.admin)).body.summary
    expect(await value('Minimum')).toBe('4.5 °C')
    expect(await value('Maximum')).toBe('9.5 °C')
    expect(await value('Mean kinetic temperature')).toBe(`${trace.mkt_c.toFixed(1)} °C`)
    // Out of range: the warm quarter hour and the unknown time, which is never counted as OK.
    const minutes = (text: string | null) => {
      const m = /^(?:(\d+) h )?(\d+) min$/.exec(text ?? '')
      expect(m, text ?? '').not.toBeNull()
      return Number(m![1] ?? 0) * 60 + Number(m![2])
    }
    const outOfRange = minutes(await value('Time out of range'))
    const unknown = minutes(await value('Of which unknown'))
    expect(unknown).toBeGreaterThanOrEqual(GAP.to - GAP.from - 16) // the silence past the profile's 15 min allowance
    expect(outOfRange).toBeGreaterThanOrEqual(unknown + WARM.to - WARM.from - 2)
  })

  it('opens a printable excursion report with the chart, summary and custody, and nothing to click', async () => {
    // The figures, not their "as of": the report computes them afresh for a delivery still open.
    const figures = async (root: Page | ReturnType<Page['locator']>) =>
      (await root.locator('section.summary dl').textContent())!.replace(/As of.*$/, '')
    const summaryOnPage = await figures(page)
    await page.getByRole('link', { name: 'Printable excursion report' }).click()
    await page.waitForURL(`${world.base}/console/#/print/${gappy.deliveryId}`)
    await page.locator('main[data-ready="true"] article.report').waitFor(LONG)
    const report = page.locator('article.report')
    expect(await report.locator('h1').textContent()).toBe(`Excursion report — prescription ${gappy.rx.rx_id}`)
    expect(await report.locator('h2').allTextContents()).toEqual(expect.arrayContaining(['Temperature', 'Summary', 'Chain of custody']))
    expect(await report.locator('figure.chart canvas').count()).toBeGreaterThan(0)
    expect(await figures(report)).toBe(summaryOnPage)
    expect(await report.locator('.verify').textContent()).toContain('Chain verified in this browser')
    expect(await report.locator('form').count(), 'no decision form in the report').toBe(0)
    // On paper (print media): nothing to click, but the chart keeps its key to the colours.
    await page.emulateMedia({ media: 'print' })
    const visibleButtons = await page
      .locator('button, a.skip, .no-print')
      .evaluateAll((els) => els.filter((el) => (el as HTMLElement).offsetParent !== null).length)
    expect(visibleButtons, 'no button on paper').toBe(0)
    expect(await report.locator('.legend-key').isVisible(), 'the colour key is printed').toBe(true)
    expect(await report.locator('.legend-key').textContent()).toMatch(/allowed range.*excursion.*no signal \(unknown\).*hard limit/)
    await page.emulateMedia({ media: 'screen' })
  })
})

describe('on a tablet (768×1024, portrait)', () => {
  /** What sticks out of the viewport sideways: the page itself, or any control. */
  const overflow = () =>
    page.evaluate(() => {
      const width = document.documentElement.clientWidth
      const out = [...document.querySelectorAll<HTMLElement>('a, button, select, input, textarea')]
        .filter((el) => el.offsetParent !== null)
        .map((el) => {
          el.focus() // the skip link is off-screen until it has the focus
          return { el: el.outerHTML.slice(0, 80), rect: el.getBoundingClientRect() }
        })
        .filter(({ rect }) => rect.left < 0 || rect.right > width + 0.5)
        .map(({ el }) => el)
      return { page: document.documentElement.scrollWidth - width, out }
    })

  it('shows the queue and a delivery without scrolling sideways, every control within reach', async () => {
    await page.setViewportSize({ width: 768, height: 1024 })
    await page.goto(`${world.base}/console/#/`)
    await expect.poll(() => page.locator('table.queue tbody tr').count(), LONG).toBe(4)
    expect(await overflow()).toEqual({ page: 0, out: [] })
    for (const label of ['Status', 'Cold-chain state', 'Created from', 'Created to'])
      expect(await page.getByLabel(label).isVisible()).toBe(true)

    await page.goto(`${world.base}/console/#/delivery/${gappy.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor(LONG)
    expect(await overflow()).toEqual({ page: 0, out: [] })
    const chart = await page.locator('figure.chart canvas').first().boundingBox()
    expect(chart!.x + chart!.width).toBeLessThanOrEqual(768)
    await page.getByRole('button', { name: 'Zoom in' }).click() // reachable and working at this width
  })
})
