// temperature.svg as a browser draws it: no text cut at the image's edges (Debian's Chromium).
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { builtInProfiles } from '../../rules/index.js'
import { traceSvg } from '../../src/timeseries/trace-svg.js'
import type { TemperatureTrace } from '../../src/timeseries/trace.js'
import { launchChromium } from '../console/console-world.js'

// The longest title a delivery gives: a picked-up delivery in an excursion, MKT of two digits.
const trace: TemperatureTrace = {
  delivery_id: 'dl_01kbcdxq8m4w6y2z0a1b3c5d7e',
  rx_id: 'rx_01kbcdxq8m4w6y2z0a1b3c5d7f',
  unit: 'Cel',
  profile: { ...builtInProfiles.refrigerated },
  from: '2026-03-01T08:00:00.000Z',
  to: '2026-03-01T10:00:00.000Z',
  step_s: 60,
  points: [
    { t: '2026-03-01T08:00:00.000Z', min: 4.8, max: 5.2, avg: 5, n: 3 },
    { t: '2026-03-01T09:59:00.000Z', min: 12.4, max: 12.9, avg: 12.66, n: 3 },
  ],
  excursions: [{ started_at: '2026-03-01T09:00:00.000Z', ended_at: null, duration_s: 3540, peak_c: 12.9, kind: 'high' }],
  summary: {
    min_c: 4.8,
    max_c: 12.9,
    mkt_c: 10.55,
    time_out_of_range_s: 3540,
    unknown_s: 0,
    as_of: '2026-03-01T10:00:00.000Z',
    scope: 'delivery',
  },
}

describe('temperature.svg in a browser', () => {
  let browser: Browser
  beforeAll(async () => {
    browser = await launchChromium()
  })
  afterAll(() => browser?.close())

  it('keeps every text inside the image, the title included', async () => {
    const page = await browser.newPage()
    const svg = traceSvg(trace, { timeZone: 'America/Los_Angeles', status: 'PICKED_UP', coldChainState: 'EXCURSION' })
    await page.setContent(`<!doctype html><body style="margin:0">${svg}</body>`)
    const boxes = await page.$$eval('svg text', (texts) =>
      texts.map((t) => {
        const box = (t as SVGTextElement).getBBox()
        return { text: t.textContent, left: box.x, right: box.x + box.width }
      }),
    )
    expect(boxes.length).toBeGreaterThan(10)
    const title = boxes.find((b) => b.text?.startsWith(`Rx ${trace.rx_id}`))
    expect(title?.text).toContain('EXCURSION')
    for (const b of boxes) {
      expect(b.left, b.text ?? '').toBeGreaterThanOrEqual(0)
      expect(b.right, b.text ?? '').toBeLessThanOrEqual(900)
    }
  })
})
