import type { Browser, Page } from 'playwright-core'
import { MINUTE } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * A delivery on its way to a patient, as the patient's phone opens its tracking link: the
 * pharmacy has a phone number, the driver is Dana Driver, the ETA is 25 minutes off. Used by
 * the browser test and by `npm run screenshots:console` (docs/console/tracking-page.png).
 */
export type TrackingScene = { api: TestApi; base: string; url: string; deliveryId: string; eta: string; stop(): Promise<void> }

export async function startTrackingScene(): Promise<TrackingScene> {
  const api = await startTestService()
  const { httpPort } = await api.service.start()
  const base = `http://127.0.0.1:${httpPort}`
  const admin = await api.adminToken()
  const pharmacy = await api.pharmacy(admin, { name: 'Lakeside Pharmacy', phone: '+13125550142' })
  const { fleetId, driverId } = await api.fleetWithDriver(admin)
  const eta = new Date(Date.now() + 25 * MINUTE).toISOString()
  const rx = await api.prescription(admin, {
    pharmacy_id: pharmacy.id,
    patient_id: 'pt_browser_7781',
    deliver_by: eta,
    delivery_address: { line1: '742 Evergreen Terrace', city: 'Springfield' },
    items: [{ description: 'Insulin glargine 100 U/mL', quantity: 1 }],
  })
  for (const [action, body] of [
    ['dispatch', { fleet_id: fleetId, driver_id: driverId }],
    ['pickup', { from: pharmacy.id, to: driverId, signature: 'sig' }],
  ] as const) {
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, admin, body)
    if (res.status !== 200) throw new Error(`${action}: ${res.status} ${res.text}`)
  }
  const link = await api.post(`/v1/deliveries/${rx.delivery_id}/tracking-links`, admin)
  if (link.status !== 201) throw new Error(`tracking link: ${link.status} ${link.text}`)
  return {
    api,
    base,
    url: (link.body.url as string).replace('http://rxtrace.test', base),
    deliveryId: rx.delivery_id,
    eta,
    stop: () => api.stop(),
  }
}

/** A phone: 390×844, touch, two device pixels per CSS pixel, in a zone far from the pharmacy's. */
export async function phonePage(browser: Browser): Promise<Page> {
  const context = await browser.newContext({
    viewport: { width: 390, height: 844 },
    deviceScaleFactor: 2,
    isMobile: true,
    hasTouch: true,
    locale: 'en-US',
    timezoneId: 'Asia/Tokyo',
  })
  return context.newPage()
}
