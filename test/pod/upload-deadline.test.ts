import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { sqliteStore } from '../helpers/stores.js'
import { rawUpload } from './behaviours.js'
import { jpegWithGps } from './images.js'

/**
 * Images are read two at a time (docs/api.md, Proof of delivery). A body trickled in to hold one of
 * those places is refused once UPLOAD_READ_TIMEOUT_S has passed since its read began, and the place
 * goes to the next upload.
 */

describe('an upload that does not arrive in time', () => {
  let api: TestApi
  let base: string
  let admin: string
  let deliveryId: string

  beforeAll(async () => {
    api = await sqliteStore.start({ UPLOAD_READ_TIMEOUT_S: '1' })
    base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
    admin = await api.adminToken()
    const pharmacyId = (await api.pharmacy(admin)).id
    const fleet = await api.fleetWithDriver(admin)
    deliveryId = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
    const dispatched = await api.post(`/v1/deliveries/${deliveryId}/dispatch`, admin, {
      fleet_id: fleet.fleetId,
      driver_id: fleet.driverId,
    })
    expect(dispatched.status, dispatched.text).toBe(200)
  })
  afterAll(async () => {
    await api?.stop()
  })

  it('is refused 408 body_too_slow, and the honest uploads behind it are read and stored', async () => {
    const path = `/v1/deliveries/${deliveryId}/attachments`
    // Two trickles take both places: each declares 4 MiB and sends 128 KiB, then nothing.
    const answered: string[] = []
    const trickles = [0, 1].map((n) =>
      rawUpload(base, path, admin, { 'content-length': String(4 * 1024 * 1024) }, 128 * 1024).then((r) => {
        answered.push(`trickle ${n}`)
        return r
      }),
    )
    await new Promise((resolve) => setTimeout(resolve, 300)) // the trickles reach their places first
    const honest = fetch(`${base}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'image/jpeg' },
      body: new Uint8Array(jpegWithGps()),
    }).then((r) => {
      answered.push('honest')
      return r
    })
    for (const trickle of await Promise.all(trickles)) {
      expect(trickle.status).toBe(408)
      expect(JSON.parse(trickle.body)).toMatchObject({ code: 'body_too_slow', status: 408 })
    }
    const stored = await honest
    expect(stored.status, await stored.clone().text()).toBe(201)
    expect(await stored.json()).toMatchObject({ content_type: 'image/jpeg' })
    // It waited for a place: both were taken until the trickles were refused.
    expect(answered.indexOf('honest')).toBeGreaterThan(0)
  })
})
