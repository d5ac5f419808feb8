import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

// GET /v1/deliveries?status= and the refusals of a dispatch that names a fleet, a driver or a
// tote the service does not know (or that belongs elsewhere).

describe('deliveries by status', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string
  let other: string
  const ids: Record<string, string[]> = { QUEUED: [], DISPATCHED: [], CANCELLED: [] }
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    other = (await api.pharmacy(admin)).id
    const { fleetId } = await api.fleetWithDriver(admin)
    for (let i = 0; i < 3; i++) ids.QUEUED!.push((await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id)
    for (let i = 0; i < 2; i++) {
      const { delivery_id } = await api.prescription(admin, { pharmacy_id: pharmacyId })
      expect((await api.post(`/v1/deliveries/${delivery_id}/dispatch`, admin, { fleet_id: fleetId })).status).toBe(200)
      ids.DISPATCHED!.push(delivery_id)
    }
    const { delivery_id } = await api.prescription(admin, { pharmacy_id: pharmacyId })
    expect((await api.post(`/v1/deliveries/${delivery_id}/cancel`, admin, { reason: 'duplicate order' })).status).toBe(200)
    ids.CANCELLED!.push(delivery_id)
    await api.prescription(admin, { pharmacy_id: other }) // QUEUED, in another pharmacy
  })
  afterAll(() => api.stop())

  const listed = async (query: string, token = admin) => {
    const res = await api.get(`/v1/deliveries?${query}`, token)
    expect(res.status, res.text).toBe(200)
    return res.body as { data: { id: string; status: string; pharmacy_id: string }[]; next_cursor: string | null }
  }

  it('lists only the deliveries in that status', async () => {
    for (const status of ['QUEUED', 'DISPATCHED', 'CANCELLED'] as const) {
      const page = await listed(`status=${status}&pharmacy_id=${pharmacyId}&limit=100`)
      expect(
        page.data.map((d) => d.id),
        status,
      ).toEqual(ids[status])
      expect(new Set(page.data.map((d) => d.status))).toEqual(new Set([status]))
    }
    expect((await listed(`status=DELIVERED&pharmacy_id=${pharmacyId}`)).data).toEqual([])
  })

  it('without pharmacy_id, an unrestricted token sees that status in every pharmacy', async () => {
    const page = await listed('status=QUEUED&limit=100')
    const mine = page.data.filter((d) => d.pharmacy_id === pharmacyId).map((d) => d.id)
    expect(mine).toEqual(ids.QUEUED)
    expect(page.data.some((d) => d.pharmacy_id === other)).toBe(true)
    expect(page.data.every((d) => d.status === 'QUEUED')).toBe(true)
  })

  it('keeps the filter across pages', async () => {
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const page: Awaited<ReturnType<typeof listed>> = await listed(
        `status=QUEUED&pharmacy_id=${pharmacyId}&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      )
      expect(page.data.length).toBeLessThanOrEqual(1)
      seen.push(...page.data.map((d) => d.id))
      cursor = page.next_cursor
    } while (cursor)
    expect(seen).toEqual(ids.QUEUED)
  })

  it("a pharmacy's token filtered by status sees its own deliveries only", async () => {
    const client = await api.post('/v1/oauth/clients', admin, { client_name: 'other desk', scope: 'deliveries:read', pharmacy_id: other })
    const token = await api.tokenFor(client.body.client_id, client.body.client_secret)
    const page = await listed('status=QUEUED&limit=100', token)
    expect(page.data).toHaveLength(1)
    expect(page.data[0]!.pharmacy_id).toBe(other)
  })
})

describe('dispatch to a fleet, driver or tote that is not there', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string
  let mine: Awaited<ReturnType<TestApi['fleetWithDriver']>>
  let theirs: Awaited<ReturnType<TestApi['fleetWithDriver']>>
  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    mine = await api.fleetWithDriver(admin)
    theirs = await api.fleetWithDriver(admin)
  })
  afterAll(() => api.stop())

  it.each([
    [
      'an unknown fleet',
      () => ({ fleet_id: 'fl_01jzzzzzzzzzzzzzzzzzzzzzzz' }),
      '/fleet_id',
      () => /no fleet fl_01jzzzzzzzzzzzzzzzzzzzzzzz/,
    ],
    [
      'an unknown driver',
      () => ({ fleet_id: mine.fleetId, driver_id: 'dr_01jzzzzzzzzzzzzzzzzzzzzzzz' }),
      '/driver_id',
      () => /dr_01jzzzzzzzzzzzzzzzzzzzzzzz is not a driver of fleet/,
    ],
    [
      "another fleet's driver",
      () => ({ fleet_id: mine.fleetId, driver_id: theirs.driverId }),
      '/driver_id',
      () => new RegExp(`${theirs.driverId} is not a driver of fleet ${mine.fleetId}`),
    ],
  ])('refuses %s with 422 naming the field, and the delivery stays QUEUED', async (_what, body, pointer, message) => {
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, body())
    expect(res.status, res.text).toBe(422)
    expect(res.headers.get('content-type')).toBe('application/problem+json')
    expect(res.body.code).toBe('validation_failed')
    expect(res.body.errors).toEqual([{ pointer, message: expect.stringMatching(message()) }])
    const after = await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)
    expect(after.body).toMatchObject({ status: 'QUEUED', fleet_id: null, driver_id: null })
    expect(after.body.custody).toHaveLength(1)
    const events = await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)
    expect(events.body.data.map((e: { type: string }) => e.type)).toEqual(['delivery.created'])
  })

  it('refuses an unknown tote for a cold-chain delivery the same way', async () => {
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, cold_chain: true })
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, {
      fleet_id: mine.fleetId,
      driver_id: mine.driverId,
      tote_id: 'tt_01jzzzzzzzzzzzzzzzzzzzzzzz',
    })
    expect(res.status, res.text).toBe(422)
    expect(res.body.errors).toEqual([{ pointer: '/tote_id', message: expect.stringContaining('tt_01jzzzzzzzzzzzzzzzzzzzzzzz') }])
    expect((await api.get(`/v1/deliveries/${rx.delivery_id}`, admin)).body.status).toBe('QUEUED')
  })

  it('dispatches once the fleet and its own driver are named', async () => {
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
    const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: mine.fleetId, driver_id: mine.driverId })
    expect(res.status, res.text).toBe(200)
    expect(res.body).toMatchObject({ status: 'DISPATCHED', fleet_id: mine.fleetId, driver_id: mine.driverId })
  })
})
