import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

const PHARMACY_SCOPES =
  'pharmacies:read prescriptions:read prescriptions:write deliveries:read deliveries:write fleet:read fleet:write totes:write telemetry:read audit:read clients:write'
const FLEET_SCOPES = 'fleet:read fleet:write deliveries:read totes:write telemetry:read audit:read'

describe('walls between tenants', () => {
  let api: TestApi
  let admin: string
  let pharmacyA: string
  let pharmacyB: string
  let fleet: { fleetId: string; driverId: string; driver2Id: string }
  let otherFleet: { fleetId: string }
  let tokenA: string
  let tokenB: string
  let fleetToken: string

  async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
    const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
    expect(res.status, res.text).toBe(201)
    return api.tokenFor(res.body.client_id, res.body.client_secret)
  }

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyA = (await api.pharmacy(admin, { name: 'A' })).id
    pharmacyB = (await api.pharmacy(admin, { name: 'B' })).id
    fleet = await api.fleetWithDriver(admin)
    otherFleet = await api.fleetWithDriver(admin)
    tokenA = await restricted(PHARMACY_SCOPES, { pharmacy_id: pharmacyA })
    tokenB = await restricted(PHARMACY_SCOPES, { pharmacy_id: pharmacyB })
    fleetToken = await restricted(FLEET_SCOPES, { fleet_id: fleet.fleetId })
  })
  afterAll(() => api.stop())

  describe('fleets', () => {
    it('lets a pharmacy read and dispatch to a fleet, but never add drivers to it', async () => {
      expect((await api.get(`/v1/fleets/${fleet.fleetId}`, tokenA)).status).toBe(200)
      const added = await api.post(`/v1/fleets/${fleet.fleetId}/drivers`, tokenA, { name: 'Mallory', phone: '+15550000001' })
      expect(added.status, added.text).toBe(403)
      expect(added.body.code).toBe('insufficient_scope')
      const drivers = (await api.get(`/v1/fleets/${fleet.fleetId}/drivers?limit=100`, admin)).body.data
      expect(drivers.map((d: { name: string }) => d.name)).not.toContain('Mallory')
      const rx = await api.prescription(tokenA, {})
      const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, tokenA, {
        fleet_id: fleet.fleetId,
        driver_id: fleet.driverId,
      })
      expect(dispatched.status, dispatched.text).toBe(200)
    })

    it('lets the fleet itself add its drivers, and only to itself', async () => {
      const own = await api.post(`/v1/fleets/${fleet.fleetId}/drivers`, fleetToken, { name: 'Own driver', phone: '+15550000002' })
      expect(own.status, own.text).toBe(201)
      expect(own.body.phone).toBe('+15550000002')
      expect((await api.post(`/v1/fleets/${otherFleet.fleetId}/drivers`, fleetToken, { name: 'Intruder' })).status).toBe(404)
    })

    it("shows a driver's phone number to the driver's own fleet and to the unrestricted operator only", async () => {
      await api.post(`/v1/fleets/${fleet.fleetId}/drivers`, admin, { name: 'Phoned', phone: '+15550000003' })
      const phoneOf = async (token: string) => {
        const res = await api.get(`/v1/fleets/${fleet.fleetId}/drivers?limit=100`, token)
        expect(res.status, res.text).toBe(200)
        return res.body.data.find((d: { name: string }) => d.name === 'Phoned')
      }
      expect((await phoneOf(fleetToken)).phone).toBe('+15550000003')
      expect((await phoneOf(admin)).phone).toBe('+15550000003')
      const seenByPharmacy = await phoneOf(tokenA)
      expect(seenByPharmacy).toMatchObject({ name: 'Phoned' })
      expect(seenByPharmacy).not.toHaveProperty('phone')
      expect(JSON.stringify((await api.get(`/v1/fleets/${fleet.fleetId}/drivers?limit=100`, tokenA)).body)).not.toContain('+1555')
    })
  })

  describe('existence oracles', () => {
    it("answers another tenant's event id in ?after= exactly like an unknown one", async () => {
      await api.prescription(tokenB, {})
      const theirs = (await api.get('/v1/events?limit=1', tokenB)).body.data[0]
      expect(theirs.id).toMatch(/^evt_/)
      const foreign = await api.get(`/v1/events?after=${theirs.id}`, tokenA)
      const unknown = await api.get('/v1/events?after=evt_01jd0000000000000000000000', tokenA)
      expect(foreign.status).toBe(unknown.status)
      expect(foreign.body.detail).toBe(unknown.body.detail)
      expect(foreign.body.code).toBe(unknown.body.code)
    })

    it("registers a tote whose serial another tenant already uses, and refuses only a serial of the tenant's own", async () => {
      expect((await api.post('/v1/totes', tokenB, { serial: 'SHARED-001' })).status).toBe(201)
      const mine = await api.post('/v1/totes', tokenA, { serial: 'SHARED-001' })
      expect(mine.status, mine.text).toBe(201)
      expect(mine.body).toMatchObject({ serial: 'SHARED-001', pharmacy_id: pharmacyA })
      expect((await api.post('/v1/totes', fleetToken, { serial: 'SHARED-001' })).status).toBe(201)
      const again = await api.post('/v1/totes', tokenA, { serial: 'SHARED-001' })
      expect(again.status).toBe(409)
    })

    it("keeps the deployment's request count out of a tenant's audit answers", async () => {
      for (let i = 0; i < 5; i++) await api.get('/v1/pharmacies', admin) // others' activity
      const pages: any[] = []
      let cursor: string | null = null
      do {
        const page: any = await api.get(`/v1/audit-events?limit=2${cursor ? `&cursor=${cursor}` : ''}`, tokenA)
        expect(page.status, page.text).toBe(200)
        pages.push(...page.body.data)
        cursor = page.body.next_cursor
        if (cursor) expect(Buffer.from(cursor, 'base64url').toString()).not.toMatch(/^\d+$/)
      } while (cursor)
      expect(pages.length).toBeGreaterThan(2)
      for (const record of pages) {
        expect(record).not.toHaveProperty('pos')
        expect(record).not.toHaveProperty('prev_hash')
      }
      expect(new Set(pages.map((r) => r.client_id)).size).toBe(1)
      expect(new Set(pages.map((r) => r.hash)).size).toBe(pages.length) // every record once, across pages
    })

    it("does not name another pharmacy's delivery when a fleet's tote is busy with it", async () => {
      const tote = await api.tote(fleetToken, { fleet_id: fleet.fleetId })
      const rxB = await api.prescription(tokenB, {})
      expect(
        (await api.post(`/v1/deliveries/${rxB.delivery_id}/dispatch`, tokenB, { fleet_id: fleet.fleetId, tote_id: tote.id })).status,
      ).toBe(200)
      const rxA = await api.prescription(tokenA, {})
      const busy = await api.post(`/v1/deliveries/${rxA.delivery_id}/dispatch`, tokenA, { fleet_id: fleet.fleetId, tote_id: tote.id })
      expect(busy.status).toBe(409)
      expect(busy.text).not.toContain(rxB.delivery_id)
      const seenByAdmin = await api.post(`/v1/deliveries/${rxA.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId, tote_id: tote.id })
      expect(seenByAdmin.text).toContain(rxB.delivery_id)
    })
  })
})
