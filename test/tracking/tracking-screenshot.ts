import type { Browser } from 'playwright-core'
import { phonePage, startTrackingScene } from './tracking-scene.js'

/** docs/console/tracking-page.png: the patient's tracking page on a phone (docs/api.md, Tracking links). */
export async function trackingPageScreenshot(browser: Browser, path: string): Promise<void> {
  const scene = await startTrackingScene()
  try {
    const page = await phonePage(browser)
    await page.goto(scene.url)
    await page.screenshot({ path, fullPage: true })
    await page.context().close()
  } finally {
    await scene.stop()
  }
}
