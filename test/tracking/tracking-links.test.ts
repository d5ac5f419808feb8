import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pinOf } from '../helpers/pins.js'
import { HOUR, MINUTE, testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { startReceiver, statuses, type Receiver } from '../webhooks/receiver.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * The patient's tracking link, over real HTTP: who may issue one, what the page shows (and what
 * it never shows), the neutral page of an altered or expired link, the link's death 24 h after
 * the delivery ends, and the `patient.notify` events a pharmacy that opted in receives.
 */

const { url: pgUrl, reasons } = await reachablePostgres()
if (!pgUrl && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const START = Date.parse('2026-11-23T20:00:00.000Z') // 14:00 in Chicago
const PATIENT = 'pt_secret_4471'
const ADDRESS = { line1: '742 Evergreen Terrace', city: 'Springfield', postal_code: '62704' }
const ITEMS = [{ description: 'Insulin glargine 100 U/mL', quantity: 1 }]

function describeTracking(store: StoreUnderTest) {
  describe(`tracking links on ${store.name}`, () => {
    let api: TestApi
    let base: string
    let admin: string
    let pharmacyId: string
    let pharmacyToken: string
    let otherPharmacyToken: string
    let fleetToken: string
    let fleet: { fleetId: string; driverId: string }
    const clock = testClock(START)
    let receiver: Receiver
    let fleetReceiver: Receiver

    let pharmacyClient: { client_id: string; client_secret: string }
    async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
      const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
      expect(res.status, res.text).toBe(201)
      if (tenant.pharmacy_id === pharmacyId && scope.includes('pharmacies:write')) pharmacyClient = res.body
      return api.tokenFor(res.body.client_id, res.body.client_secret)
    }
    /** Moves the clock; tokens live a day at most, so the ones the test uses are signed again. */
    async function setClock(ms: number) {
      clock.set(ms)
      admin = await api.adminToken()
      pharmacyToken = await api.tokenFor(pharmacyClient.client_id, pharmacyClient.client_secret)
    }
    const act = async (id: string, action: string, body: Record<string, unknown>) => {
      clock.advance(MINUTE)
      const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
      expect(res.status, res.text).toBe(200)
    }
    const newDelivery = async (more: object = {}) =>
      (
        await api.prescription(admin, {
          pharmacy_id: pharmacyId,
          patient_id: PATIENT,
          delivery_address: ADDRESS,
          items: ITEMS,
          deliver_by: new Date(START + 2 * HOUR).toISOString(),
          ...more,
        })
      ).delivery_id
    const link = async (deliveryId: string, token = pharmacyToken) => api.post(`/v1/deliveries/${deliveryId}/tracking-links`, token)
    /** The page as a phone fetches it: over the socket, from the URL the API answered. */
    const visit = async (url: string) => {
      const res = await fetch(url.replace('http://rxtrace.test', base), { redirect: 'manual' })
      return { status: res.status, headers: res.headers, text: await res.text() }
    }
    const visible = (html: string) =>
      html
        .replace(/<style[\s\S]*?<\/style>/g, '')
        .replace(/<[^>]+>/g, ' ')
        .replace(/\s+/g, ' ')

    beforeAll(async () => {
      api = await store.start({}, { clock })
      const { httpPort } = await api.service.start()
      base = `http://127.0.0.1:${httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin, { name: 'Lakeside Pharmacy', phone: '+13125550142' })).id
      const other = await api.pharmacy(admin, { name: 'Other Pharmacy' })
      pharmacyToken = await restricted('deliveries:read deliveries:write pharmacies:read pharmacies:write webhooks:write', {
        pharmacy_id: pharmacyId,
      })
      otherPharmacyToken = await restricted('deliveries:read deliveries:write', { pharmacy_id: other.id })
      fleet = await api.fleetWithDriver(admin)
      fleetToken = await restricted('deliveries:read deliveries:write fleet:read', { fleet_id: fleet.fleetId })
    }, 60_000)

    afterAll(async () => {
      await api?.stop()
      await receiver?.close()
      await fleetReceiver?.close()
    })

    describe('the pharmacy phone', () => {
      it('is kept in E.164, changed and removed by PATCH, and refused in any other form', async () => {
        expect((await api.get(`/v1/pharmacies/${pharmacyId}`, admin)).body).toMatchObject({ phone: '+13125550142', patient_notify: false })
        for (const phone of ['312-555-0142', '+0123456789', '+1 312 555 0142', '+1234567890123456']) {
          const bad = await api.post('/v1/pharmacies', admin, {
            name: 'Bad Phone',
            address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
            timezone: 'America/Chicago',
            phone,
          })
          expect(bad.status, phone).toBe(422)
          expect(bad.body.errors[0].pointer).toBe('/phone')
        }
        const changed = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, {
          token: pharmacyToken,
          body: { phone: '+13125550199' },
        })
        expect(changed.status, changed.text).toBe(200)
        expect(changed.body.phone).toBe('+13125550199')
        const removed = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, { token: pharmacyToken, body: { phone: null } })
        expect(removed.body.phone).toBeNull()
        const back = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, { token: pharmacyToken, body: { phone: '+13125550142' } })
        expect(back.body.phone).toBe('+13125550142')
        const bad = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, { token: pharmacyToken, body: { phone: 'call us' } })
        expect(bad.status).toBe(422)
      })
    })

    describe('issuing', () => {
      it('is for the delivery’s pharmacy only: never its fleet, never another pharmacy', async () => {
        const deliveryId = await newDelivery()
        await act(deliveryId, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        expect((await link(deliveryId, fleetToken)).status).toBe(404)
        expect((await link(deliveryId, otherPharmacyToken)).status).toBe(404)
        const readOnly = await restricted('deliveries:read', { pharmacy_id: pharmacyId })
        expect((await link(deliveryId, readOnly)).status).toBe(403)
        const res = await link(deliveryId)
        expect(res.status, res.text).toBe(201)
        expect(res.body.url).toMatch(/^http:\/\/rxtrace\.test\/track\?token=[\w-]+\.[\w-]+\.[\w-]+$/)
        expect(res.headers.get('cache-control')).toContain('no-store')
        // Open: a week at most.
        expect(Date.parse(res.body.expires_at)).toBe(Math.floor(clock.now() / 1000) * 1000 + 7 * 24 * HOUR)
      })
    })

    describe('the page', () => {
      let deliveryId: string
      let url: string

      beforeAll(async () => {
        deliveryId = await newDelivery()
        await act(deliveryId, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        await act(deliveryId, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
        url = (await link(deliveryId)).body.url
      })

      it('says where the delivery is, when it comes in the pharmacy’s local time, who brings it and whom to call', async () => {
        const page = await visit(url)
        expect(page.status).toBe(200)
        const text = visible(page.text)
        expect(text).toContain('Your delivery is on its way')
        expect(text).toContain('Lakeside Pharmacy')
        expect(text).toContain('+13125550142')
        expect(page.text).toContain('href="tel:+13125550142"')
        // Due at 16:00 Chicago; two minutes have passed since 14:00.
        expect(text).toMatch(/Expected 4:00 PM CST \(in about 1 h 5\d min\)/)
        expect(text).toContain('Your driver Dana')
      })

      it('shows the PIN only when the delivery requires one, and only until it ends', async () => {
        expect(visible((await visit(url)).text)).not.toMatch(/PIN/)
        const withPin = await newDelivery({ pod_requirements: { pin: true } })
        await act(withPin, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        const pinUrl = (await link(withPin)).body.url
        const pin = (await pinOf(api, withPin))!
        expect(pin).toMatch(/^\d{4,6}$/)
        expect(visible((await visit(pinUrl)).text)).toContain(pin)
        await act(withPin, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
        await act(withPin, 'deliver', { verification: { method: 'otp', evidence: 'told' }, proof: { pin } })
        const ended = await visit(pinUrl)
        expect(ended.status).toBe(200)
        expect(ended.text).not.toContain(pin)
      })

      it('shows nothing else: no patient, address, items, ids or the driver’s full name', async () => {
        const page = await visit(url)
        for (const secret of [
          PATIENT,
          '742 Evergreen',
          'Insulin',
          deliveryId,
          fleet.driverId,
          fleet.fleetId,
          pharmacyId,
          'Dana Driver',
          'Speedy',
        ]) {
          expect(page.text).not.toContain(secret)
        }
        const rx = (await api.get(`/v1/deliveries/${deliveryId}`, admin)).body.rx_id as string
        expect(page.text).not.toContain(rx)
      })

      it('is kept by no cache, leaks no referrer, runs no script and cannot be framed', async () => {
        const page = await visit(url)
        expect(page.headers.get('cache-control')).toBe('no-store')
        expect(page.headers.get('referrer-policy')).toBe('no-referrer')
        expect(page.headers.get('x-content-type-options')).toBe('nosniff')
        const csp = page.headers.get('content-security-policy')!
        expect(csp).toContain("default-src 'none'")
        expect(csp).toContain("frame-ancestors 'none'")
        expect(csp).not.toContain('script-src')
        expect(page.text).not.toContain('<script')
      })

      it('shows one neutral sentence for an altered, foreign or missing token', async () => {
        const token = new URL(url).searchParams.get('token')!
        const [header, payload, signature] = token.split('.')
        const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString())
        const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'dl_someoneelse', delivery_id: 'dl_someoneelse' })).toString(
          'base64url',
        )
        const embed = (await api.post(`/v1/fleets/${fleet.fleetId}/embed-sessions`, admin, { ttl_s: 60 })).body.url as string
        for (const bad of [
          `${base}/track?token=${header}.${forged}.${signature}`,
          `${base}/track?token=${token.slice(0, -4)}AAAA`,
          `${base}/track?token=x`,
          `${base}/track`,
          embed.replace('/embed/dashboard', '/track'),
        ]) {
          const page = await visit(bad)
          expect(page.status, bad).toBe(404)
          expect(visible(page.text).trim()).toBe(
            'Link not available This tracking link is not available If you are expecting a delivery, please contact your pharmacy.',
          )
          expect(page.headers.get('cache-control')).toBe('no-store')
          expect(page.headers.get('referrer-policy')).toBe('no-referrer')
        }
      })
    })

    describe('when the delivery ends', () => {
      it('says it arrived, drops the ETA and the driver, and dies 24 h later: 410, and no new link', async () => {
        const deliveryId = await newDelivery()
        await act(deliveryId, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        const url = (await link(deliveryId)).body.url as string
        await act(deliveryId, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
        await act(deliveryId, 'deliver', { verification: { method: 'otp', evidence: '1' } })
        const endedAt = clock.now()
        const page = await visit(url)
        expect(page.status).toBe(200)
        const text = visible(page.text)
        expect(text).toContain('Your delivery has arrived')
        expect(text).not.toContain('Expected')
        expect(text).not.toContain('Dana')
        const after = await link(deliveryId)
        expect(after.status).toBe(201)
        expect(Date.parse(after.body.expires_at)).toBe(Math.floor((endedAt + 24 * HOUR) / 1000) * 1000)

        await setClock(endedAt + 24 * HOUR - MINUTE)
        expect((await visit(url)).status).toBe(200)
        await setClock(endedAt + 24 * HOUR + MINUTE)
        const gone = await visit(url)
        expect(gone.status).toBe(410)
        expect(visible(gone.text)).toContain('This tracking link is not available')
        expect(gone.text).not.toContain('Lakeside')
        expect((await visit(after.body.url)).status).toBe(410)
        const closed = await link(deliveryId)
        expect(closed.status).toBe(409)
        expect(closed.body.code).toBe('tracking_closed')
      })

      it('an open delivery’s link dies a week after it was issued', async () => {
        await setClock(START + 3 * 24 * HOUR)
        const deliveryId = await newDelivery()
        const url = (await link(deliveryId)).body.url as string
        expect(visible((await visit(url)).text)).toContain('Your delivery is being prepared')
        await setClock(clock.now() + 7 * 24 * HOUR + MINUTE)
        expect((await visit(url)).status).toBe(410)
      })
    })

    describe('patient.notify', () => {
      it('a pharmacy that opted in gets the link with each step, the fleet never does', async () => {
        receiver = await startReceiver(statuses(200))
        fleetReceiver = await startReceiver(statuses(200))
        const fleetHooks = await restricted('webhooks:write', { fleet_id: fleet.fleetId })
        expect((await api.post('/v1/webhooks', fleetHooks, { url: fleetReceiver.url, events: ['*'] })).status).toBe(201)
        const hook = await api.post('/v1/webhooks', pharmacyToken, { url: receiver.url, events: ['patient.notify'] })
        expect(hook.status, hook.text).toBe(201)
        const optIn = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, { token: pharmacyToken, body: { patient_notify: true } })
        expect(optIn.body.patient_notify).toBe(true)
        const deliveryId = await newDelivery()
        await act(deliveryId, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        expect((await link(deliveryId)).status).toBe(201)
        await act(deliveryId, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
        await act(deliveryId, 'deliver', { verification: { method: 'otp', evidence: '1' } })
        // As the pharmacy's messaging provider receives them: signed webhooks, in order per delivery,
        // each counted once by its id. Delivery is at least once: the test clock runs ~100× real
        // time below, so an attempt still in flight can outlive its lease (judged by that clock) and
        // be sent again, as after a crash; a receiver drops the copy by id.
        const notices = () =>
          [...new Map(receiver.requests.map((r) => JSON.parse(r.body)).map((e) => [e.id, e])).values()]
            .filter((e) => e.delivery_id === deliveryId)
            .sort((a, b) => a.seq - b.seq)
        // The service's clock stands still between moves: move it on while waiting, so that an
        // attempt a loaded machine lost is retried (5 s later on the webhook schedule).
        const arrived = (count: () => number) => () => (clock.advance(5_000), count())
        await expect
          .poll(
            arrived(() => notices().length),
            { timeout: 30_000 },
          )
          .toBe(4)
        const events = notices()
        expect(events.map((e) => e.data.kind)).toEqual(['dispatched', 'link_issued', 'out_for_delivery', 'delivered'])
        for (const event of events) {
          expect(Object.keys(event.data).sort()).toEqual(['kind', 'link_expires_at', 'tracking_url'])
          expect(event.fleet_id).toBeNull()
          expect(event.pharmacy_id).toBe(pharmacyId)
          expect(JSON.stringify(event)).not.toContain(PATIENT)
          expect((await visit(event.data.tracking_url)).status).toBe(200)
        }
        expect(visible((await visit(events.at(-1).data.tracking_url)).text)).toContain('Your delivery has arrived')
        // The fleet's endpoint, subscribed to everything, hears the delivery's moves and no notice.
        const heard = () => fleetReceiver.requests.map((r) => JSON.parse(r.body)).filter((e) => e.delivery_id === deliveryId)
        await expect
          .poll(
            arrived(() => Number(heard().some((e) => e.type === 'delivery.delivered'))),
            { timeout: 30_000 },
          )
          .toBe(1)
        expect(heard().filter((e) => e.type === 'patient.notify')).toEqual([])

        await setClock(clock.now()) // the polls moved the clock on, maybe past the tokens' 15 minutes
        const notifyOff = await api.request('PATCH', `/v1/pharmacies/${pharmacyId}`, {
          token: pharmacyToken,
          body: { patient_notify: false },
        })
        expect(notifyOff.status, notifyOff.text).toBe(200)
        const quiet = await newDelivery()
        await act(quiet, 'dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
        expect((await link(quiet)).status).toBe(201)
        await act(quiet, 'pickup', { from: pharmacyId, to: fleet.driverId, signature: 'sig' })
        // Written in the moves' own transactions, or not at all: the outbox has none for it.
        const written = await api.service.db.selectFrom('events').select('type').where('delivery_id', '=', quiet).execute()
        expect(written.length).toBeGreaterThan(2)
        expect(written.filter((e) => e.type === 'patient.notify')).toEqual([])
      })
    })
  })
}

describe('rate limits of the tracking page', () => {
  let api: TestApi
  let base: string
  beforeAll(async () => {
    api = await sqliteStore.start({
      TRACKING_LINK_RPS: '0.01',
      TRACKING_LINK_BURST: '3',
      TRACKING_ADDRESS_RPS: '0.01',
      TRACKING_ADDRESS_BURST: '5',
    })
    base = `http://127.0.0.1:${(await api.service.start()).httpPort}`
  })
  afterAll(async () => {
    await api?.stop()
  })

  it('answers 429 with Retry-After once a link, then an address, has spent its burst', async () => {
    const admin = await api.adminToken()
    const pharmacyId = (await api.pharmacy(admin)).id
    const deliveryId = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
    const urls = await Promise.all(
      [1, 2].map(async () => (await api.post(`/v1/deliveries/${deliveryId}/tracking-links`, admin)).body.url as string),
    )
    const visit = (url: string) => fetch(url.replace('http://rxtrace.test', base))
    const statuses = []
    for (let i = 0; i < 4; i++) statuses.push((await visit(urls[0]!)).status)
    expect(statuses).toEqual([200, 200, 200, 429])
    // The 4th spent an address token too: one more request for the second link, then the address is out.
    expect((await visit(urls[1]!)).status).toBe(200)
    const refused = await visit(urls[1]!)
    expect(refused.status).toBe(429)
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    expect(refused.headers.get('cache-control')).toBe('no-store')
    expect(await refused.text()).toContain('Too many requests')
  })
})

describeTracking(sqliteStore)
if (pgUrl) {
  const pg = postgresStore(pgUrl)
  describeTracking(pg)
  afterAll(() => pg.cleanup())
}
