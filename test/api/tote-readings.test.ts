import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { dispatchedColdChain, feed } from '../trace/cold-chain-delivery.js'

/** GET /v1/totes/{id}/readings: where a tote's readings went, newest first (docs/api.md, Totes). */

let api: TestApi
let admin: string
let pharmacy: string
let tote: string
let delivery: string
const now = Date.now()
// Ten readings a minute apart; the tote is dispatched after the first four.
const readings = Array.from({ length: 10 }, (_, i) => ({ ts: now - (10 - i) * 60_000, temp_c: 4 + i / 10 }))

async function restricted(scope: string, tenant: Record<string, string>): Promise<string> {
  const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
  expect(res.status, res.text).toBe(201)
  return api.tokenFor(res.body.client_id, res.body.client_secret)
}

beforeAll(async () => {
  const clock = testClock(now - 20 * 60_000)
  api = await startTestService({}, { clock })
  const trip = await dispatchedColdChain(api, clock, readings[4]!.ts - 1_000)
  admin = await api.adminToken() // on the wall clock again
  ;[pharmacy, tote, delivery] = [trip.pharmacy.id, trip.tote.id, trip.deliveryId]
  await feed(api, tote, readings)
})
afterAll(() => api.stop())

describe('GET /v1/totes/{id}/readings', () => {
  it('lists the readings newest first, each with the delivery it was attributed to, paged by cursor', async () => {
    const seen: { ts: string; temp_c: number; delivery_id: string | null }[] = []
    let cursor: string | null = null
    do {
      const res: { status: number; text: string; body: { data: typeof seen; next_cursor: string | null } } = await api.get(
        `/v1/totes/${tote}/readings?limit=3${cursor ? `&cursor=${cursor}` : ''}`,
        admin,
      )
      expect(res.status, res.text).toBe(200)
      expect(res.body.data.length).toBeLessThanOrEqual(3)
      seen.push(...res.body.data)
      cursor = res.body.next_cursor
    } while (cursor)
    expect(seen.map((r) => Date.parse(r.ts))).toEqual(readings.map((r) => r.ts).reverse())
    expect(seen[0]).toMatchObject({ temp_c: 4.9, delivery_id: delivery })
    expect(seen.map((r) => r.delivery_id)).toEqual([...Array(6).fill(delivery), ...Array(4).fill(null)])
  })

  it('keeps the walls of other tote routes: another pharmacy’s token gets 404, the owner’s gets the readings', async () => {
    const own = await restricted('telemetry:read', { pharmacy_id: pharmacy })
    const other = await restricted('telemetry:read', { pharmacy_id: (await api.pharmacy(admin, {})).id })
    expect((await api.get(`/v1/totes/${tote}/readings`, own)).body.data).toHaveLength(10)
    const refused = await api.get(`/v1/totes/${tote}/readings`, other)
    expect(refused.status).toBe(404)
    expect(refused.body.code).toBe('not_found')
    const noScope = await restricted('deliveries:read', { pharmacy_id: pharmacy })
    expect((await api.get(`/v1/totes/${tote}/readings`, noScope)).status).toBe(403)
  })

  it('refuses a cursor it did not give', async () => {
    const res = await api.get(`/v1/totes/${tote}/readings?cursor=nonsense!`, admin)
    expect(res.status).toBe(422)
  })
})
