import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { MINUTE, testClock } from '../helpers/clock.js'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * The fleet's dashboard as JSON, and the same live view embedded in an iframe through a
 * short-lived signed URL: branded, framable only by the fleet's origins, and nothing but an
 * error page once the URL is expired or altered.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

const START = Date.parse('2026-11-11T16:00:00.000Z')
const CARD = {
  currency: 'USD',
  base_fee_cents: 650,
  per_km_cents: 85,
  cold_chain_surcharge_cents: 300,
  failed_attempt_fee_cents: 400,
  after_hours_multiplier: 1.5,
  commission_bps: 1200,
}
const BRANDING = { display_name: 'Speedy <Couriers>', logo_url: 'https://cdn.speedy.example.com/logo.png', primary_color: '#0a7d5a' }

function describeDashboard(store: StoreUnderTest) {
  describe(`fleet dashboard and embed on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    let fleetId: string
    let driverId: string
    let fleetToken: string
    let inProgress: string
    let failed: string
    const clock = testClock(START)

    async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
      const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
      expect(res.status, res.text).toBe(201)
      return api.tokenFor(res.body.client_id, res.body.client_secret)
    }
    const act = async (id: string, action: string, body: Record<string, unknown>) => {
      clock.advance(MINUTE)
      const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
      expect(res.status, res.text).toBe(200)
    }
    const embedUrl = async (ttl_s = 120) => {
      const res = await api.post(`/v1/fleets/${fleetId}/embed-sessions`, fleetToken, { ttl_s })
      expect(res.status, res.text).toBe(201)
      return res.body as { url: string; expires_at: string }
    }
    const pathOf = (url: string) => url.replace('http://rxtrace.test', '')

    beforeAll(async () => {
      api = await store.start({ TOKEN_TTL_S: '86400' }, { clock })
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
      const created = await api.post('/v1/fleets', admin, {
        name: 'Speedy',
        branding: BRANDING,
        embed_origins: ['https://dispatch.speedy.example.com', 'https://speedy.example.com'],
      })
      expect(created.status, created.text).toBe(201)
      expect(created.body.embed_origins).toEqual(['https://dispatch.speedy.example.com', 'https://speedy.example.com'])
      fleetId = created.body.id
      driverId = (await api.post(`/v1/fleets/${fleetId}/drivers`, admin, { name: 'Dana' })).body.id
      fleetToken = await restricted('fleet:read deliveries:read', { fleet_id: fleetId })
      expect((await api.request('PUT', `/v1/fleets/${fleetId}/rate-card`, { token: admin, body: CARD })).status).toBe(201)

      // One delivered by its eta, one delivered late, one failed, one still on the road.
      for (const late of [false, true]) {
        const rx = await api.prescription(admin, {
          pharmacy_id: pharmacyId,
          ...(late ? { deliver_by: new Date(START + 2 * MINUTE).toISOString() } : {}),
        })
        await act(rx.delivery_id, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
        await act(rx.delivery_id, 'pickup', { from: pharmacyId, to: driverId, signature: 'sig' })
        await act(rx.delivery_id, 'deliver', { verification: { method: 'otp', evidence: '1' } })
      }
      const amoxicillin = [{ description: 'Amoxicillin 500 mg capsules', quantity: 21 }]
      failed = (await api.prescription(admin, { pharmacy_id: pharmacyId, items: amoxicillin })).delivery_id
      await act(failed, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
      await act(failed, 'pickup', { from: pharmacyId, to: driverId, signature: 'sig' })
      await act(failed, 'fail', { reason: 'patient_unavailable', note: 'nobody home' })
      const items = [
        { description: 'Insulin glargine pen', quantity: 5 },
        { description: 'Pen needles 4 mm', quantity: 100 },
      ]
      inProgress = (await api.prescription(admin, { pharmacy_id: pharmacyId, items })).delivery_id
      await act(inProgress, 'dispatch', { fleet_id: fleetId, driver_id: driverId })
    })
    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })

    it('answers the dashboard: counts, exceptions, deliveries in progress, on-time rate and payout this month', async () => {
      const res = await api.get(`/v1/fleets/${fleetId}/dashboard`, fleetToken)
      expect(res.status, res.text).toBe(200)
      expect(res.body.counts).toMatchObject({ DELIVERED: 2, FAILED: 1, DISPATCHED: 1, PICKED_UP: 0 })
      expect(res.body.open_exceptions).toMatchObject({
        count: 1,
        items: [{ delivery_id: failed, kind: 'failed', items: ['Amoxicillin 500 mg capsules'] }],
      })
      expect(res.body.in_progress.count).toBe(1)
      expect(res.body.in_progress.items[0]).toMatchObject({
        delivery_id: inProgress,
        status: 'DISPATCHED',
        items: ['Insulin glargine pen', 'Pen needles 4 mm'],
        cold_chain: { required: false, state: 'UNMONITORED' },
      })
      expect(res.body.on_time).toEqual({ delivered: 2, on_time: 1, rate: 0.5 })
      expect(res.body.period).toEqual({ from: '2026-11-01T00:00:00.000Z', to: '2026-12-01T00:00:00.000Z' })
      // Two deliveries at 650 − 78 commission, one failed attempt at 400 − 48.
      expect(res.body.payout).toEqual({ currency: 'USD', lines: 3, gross_cents: 1700, payout_cents: 1496 })
    })

    it("serves the embedded page in the fleet's branding, framable only by its origins", async () => {
      const session = await embedUrl(120)
      expect(session.expires_at).toBe(new Date(clock.now() + 120_000).toISOString())
      const page = await api.request('GET', pathOf(session.url))
      expect(page.status).toBe(200)
      expect(page.headers.get('content-type')).toMatch(/^text\/html/)
      const csp = page.headers.get('content-security-policy')!
      expect(csp).toContain('frame-ancestors https://dispatch.speedy.example.com https://speedy.example.com')
      expect(csp).toContain("default-src 'none'")
      expect(page.headers.get('referrer-policy')).toBe('no-referrer')
      expect(page.text).toContain('Speedy &#60;Couriers&#62;') // escaped, never markup
      expect(page.text).toContain('https://cdn.speedy.example.com/logo.png')
      expect(page.text).toContain('#0a7d5a')
      expect(page.text).toContain(inProgress)
      expect(page.text).not.toContain('payout')

      const data = await api.request('GET', pathOf(session.url).replace('/embed/dashboard?', '/embed/dashboard/data?'))
      expect(data.status).toBe(200)
      expect(data.body.in_progress.items.map((d: { delivery_id: string }) => d.delivery_id)).toEqual([inProgress])
      expect(data.body).not.toHaveProperty('payout')
    })

    it('follows a change of embed origins; no origins means framed nowhere', async () => {
      const changed = await api.request('PATCH', `/v1/fleets/${fleetId}`, { token: admin, body: { embed_origins: [] } })
      expect(changed.status, changed.text).toBe(200)
      const page = await api.request('GET', pathOf((await embedUrl()).url))
      expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
      await api.request('PATCH', `/v1/fleets/${fleetId}`, { token: admin, body: { embed_origins: ['https://speedy.example.com'] } })
      const bad = await api.request('PATCH', `/v1/fleets/${fleetId}`, {
        token: admin,
        body: { embed_origins: ['http://speedy.example.com/path'] },
      })
      expect(bad.status).toBe(422)
    })

    it('shows an error page and nothing else for an altered URL', async () => {
      const { url } = await embedUrl()
      const token = new URL(url).searchParams.get('token')!
      const [header, payload, signature] = token.split('.')
      const otherFleet = Buffer.from(
        JSON.stringify({ ...JSON.parse(Buffer.from(payload!, 'base64url').toString()), fleet_id: 'fl_other', sub: 'fl_other' }),
      ).toString('base64url')
      const flipped = signature!.slice(0, -2) + (signature!.endsWith('AA') ? 'AB' : 'AA')
      for (const altered of [`${header}.${otherFleet}.${signature}`, `${header}.${payload}.${flipped}`, 'not-a-token', '']) {
        const page = await api.request('GET', `/embed/dashboard?token=${altered}`)
        expect(page.status, altered).toBe(401)
        expect(page.text).toContain('expired or is not valid')
        expect(page.text).not.toContain('Speedy')
        expect(page.text).not.toContain('<script')
        expect((await api.request('GET', `/embed/dashboard/data?token=${altered}`)).status).toBe(401)
      }
    })

    it('shows the error page once the URL has expired', async () => {
      const { url } = await embedUrl(60)
      expect((await api.request('GET', pathOf(url))).status).toBe(200)
      clock.advance(61_000)
      const page = await api.request('GET', pathOf(url))
      expect(page.status).toBe(401)
      expect(page.text).not.toContain('Speedy')
      expect((await api.request('GET', pathOf(url).replace('/embed/dashboard?', '/embed/dashboard/data?'))).status).toBe(401)
    })

    it('never takes an access token for an embed token, nor the reverse', async () => {
      const asEmbed = await api.request('GET', `/embed/dashboard?token=${fleetToken}`)
      expect(asEmbed.status).toBe(401)
      const embedToken = new URL((await embedUrl()).url).searchParams.get('token')!
      expect((await api.get(`/v1/fleets/${fleetId}/dashboard`, embedToken)).status).toBe(401)
    })

    it("keeps the fleet's time zone (UTC until set, an IANA name when set) and names driver and pharmacy in the live view", async () => {
      expect((await api.get(`/v1/fleets/${fleetId}`, fleetToken)).body.timezone).toBe('UTC')
      const bad = await api.request('PATCH', `/v1/fleets/${fleetId}`, { token: admin, body: { timezone: 'Mars/Olympus_Mons' } })
      expect(bad.status).toBe(422)
      expect(bad.body.errors[0].pointer).toBe('/timezone')
      expect((await api.get(`/v1/fleets/${fleetId}`, fleetToken)).body.timezone).toBe('UTC') // nothing stored
      const set = await api.request('PATCH', `/v1/fleets/${fleetId}`, { token: admin, body: { timezone: 'America/Chicago' } })
      expect(set.status, set.text).toBe(200)
      expect(set.body.timezone).toBe('America/Chicago')
      const created = await api.post('/v1/fleets', admin, { name: 'Night Owls', timezone: 'Europe/Berlin' })
      expect(created.status, created.text).toBe(201)
      expect((await api.get(`/v1/fleets/${created.body.id}`, admin)).body.timezone).toBe('Europe/Berlin')
      expect((await api.post('/v1/fleets', admin, { name: 'Nowhere', timezone: 'CET+99' })).status).toBe(422)

      const view = (await api.get(`/v1/fleets/${fleetId}/dashboard`, fleetToken)).body
      expect(view.timezone).toBe('America/Chicago')
      expect(view.in_progress.items[0]).toMatchObject({
        delivery_id: inProgress,
        driver_name: 'Dana',
        pharmacy_name: 'Main Street Pharmacy',
      })
      expect(view.open_exceptions.items[0]).toMatchObject({
        delivery_id: failed,
        driver_name: 'Dana',
        pharmacy_name: 'Main Street Pharmacy',
      })
    })

    it('refuses a session longer than 10 minutes', async () => {
      const res = await api.post(`/v1/fleets/${fleetId}/embed-sessions`, fleetToken, { ttl_s: 601 })
      expect(res.status).toBe(422)
      expect(res.body.errors[0].pointer).toBe('/ttl_s')
    })
  })
}

describeDashboard(sqliteStore)
if (url) describeDashboard(postgresStore(url))
