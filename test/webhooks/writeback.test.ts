import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { statuses, type ReceivedRequest } from './receiver.js'
import { useWebhookService } from './webhook-service.js'

type Envelope = {
  id: string
  type: string
  pharmacy_id: string
  delivery_id: string
  rx_id: string
  seq: number
  data: Record<string, unknown>
}

const verify = (secret: string, req: ReceivedRequest) =>
  new Webhook(secret).verify(req.body, {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  }) as Envelope

describe('writeback of delivery outcomes to the pharmacy (SPEC §7)', () => {
  // Four attempts 50 ms apart: a failing writeback gives up within a second.
  const SCHEDULE = '50ms,50ms,50ms'
  const fixture = useWebhookService(SCHEDULE)
  const { receiver } = fixture
  let api: TestApi
  let admin: string
  beforeAll(() => void ({ api, admin } = fixture))

  /** A pharmacy with a writeback URL, and the secret its creation response showed once. */
  async function pharmacyWithWriteback(url: string) {
    const res = await api.post('/v1/pharmacies', admin, {
      name: 'Writeback Pharmacy',
      address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
      writeback: { url },
    })
    expect(res.status, res.text).toBe(201)
    return { id: res.body.id as string, secret: res.body.writeback.secret as string, created: res }
  }

  /** Queues, dispatches and picks up a delivery; returns what the end of it needs. */
  async function pickedUp(pharmacyId: string) {
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId })
    for (const [action, body] of [
      ['dispatch', { fleet_id: fleetId, driver_id: driverId }],
      ['pickup', { from: pharmacyId, to: driverId, signature: 'signed at the counter' }],
    ] as const) {
      const res = await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, admin, body)
      expect(res.status, `${action}: ${res.text}`).toBe(200)
    }
    return { deliveryId: rx.delivery_id, rxId: rx.rx_id, driverId }
  }

  const writebackEvents = async (deliveryId: string) =>
    ((await api.get(`/v1/events?delivery_id=${deliveryId}`, admin)).body.data as Envelope[]).filter((e) => e.type.startsWith('writeback.'))

  it('shows the writeback secret once, in the creation response only', async () => {
    const { id, secret, created } = await pharmacyWithWriteback('http://127.0.0.1:9/writeback')
    expect(secret).toMatch(/^whsec_/)
    expect(created.body.writeback).toEqual({ url: 'http://127.0.0.1:9/writeback', format: 'rxtrace', secret })
    const read = await api.get(`/v1/pharmacies/${id}`, admin)
    expect(read.body.writeback).toEqual({ url: 'http://127.0.0.1:9/writeback', format: 'rxtrace' })
    const listed = await api.get('/v1/pharmacies?limit=100', admin)
    const webhooks = await api.get('/v1/webhooks?limit=100', admin)
    for (const res of [read, listed, webhooks]) expect(res.text).not.toContain(secret)
  })

  it('POSTs DELIVERED to the writeback URL, signed with the pharmacy secret, then announces writeback.completed', async () => {
    const r = await receiver()
    const pharmacy = await pharmacyWithWriteback(`${r.url}/writeback`)
    const { deliveryId, rxId } = await pickedUp(pharmacy.id)
    const delivered = await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, { verification: { method: 'otp', evidence: '482913' } })
    expect(delivered.status, delivered.text).toBe(200)

    await waitFor(() => r.requests.length >= 1, 5_000, 'the writeback')
    expect(r.requests).toHaveLength(1) // only the outcome is written back, not the journey
    const req = r.requests[0]!
    expect(req.url).toBe('/writeback')
    const outcome = verify(pharmacy.secret, req)
    expect(outcome).toMatchObject({
      type: 'delivery.delivered',
      pharmacy_id: pharmacy.id,
      delivery_id: deliveryId,
      rx_id: rxId,
      data: { status: 'DELIVERED' },
    })
    expect(req.headers['webhook-id']).toBe(outcome.id)

    await waitFor(async () => (await writebackEvents(deliveryId)).length === 1, 5_000, 'writeback.completed')
    const [announced] = await writebackEvents(deliveryId)
    expect(announced).toMatchObject({
      type: 'writeback.completed',
      pharmacy_id: pharmacy.id,
      delivery_id: deliveryId,
      data: { outcome_event_id: outcome.id, outcome: 'delivery.delivered', attempts: 1, status_code: 200, error: null },
    })
  })

  it('POSTs RETURNED the same way, and a subscriber hears writeback.completed', async () => {
    const r = await receiver()
    const subscriber = await receiver()
    const pharmacy = await pharmacyWithWriteback(`${r.url}/writeback`)
    await api.post('/v1/webhooks', admin, {
      url: subscriber.url,
      events: ['writeback.completed', 'writeback.failed'],
      pharmacy_id: pharmacy.id,
    })
    const { deliveryId, driverId } = await pickedUp(pharmacy.id)
    const returned = await api.post(`/v1/deliveries/${deliveryId}/return`, admin, {
      from: driverId,
      to: pharmacy.id,
      signature: 'nobody home',
    })
    expect(returned.status, returned.text).toBe(200)

    await waitFor(() => r.requests.length >= 1, 5_000, 'the writeback')
    const outcome = verify(pharmacy.secret, r.requests[0]!)
    expect(outcome).toMatchObject({ type: 'delivery.returned', delivery_id: deliveryId, data: { status: 'RETURNED' } })
    await waitFor(() => subscriber.requests.length >= 1, 5_000, 'writeback.completed at the subscriber')
    expect(JSON.parse(subscriber.requests[0]!.body)).toMatchObject({
      type: 'writeback.completed',
      delivery_id: deliveryId,
      data: { outcome_event_id: outcome.id, outcome: 'delivery.returned' },
    })
  })

  it('a writeback URL that answers 500 until the schedule is used up → writeback.failed', async () => {
    const r = await receiver(statuses(500))
    const pharmacy = await pharmacyWithWriteback(`${r.url}/writeback`)
    const { deliveryId } = await pickedUp(pharmacy.id)
    await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, { verification: { method: 'signature', evidence: 'scrawl' } })

    const attempts = SCHEDULE.split(',').length + 1
    await waitFor(async () => (await writebackEvents(deliveryId)).length === 1, 5_000, 'writeback.failed')
    expect(r.requests).toHaveLength(attempts)
    const outcomeId = String(r.requests[0]!.headers['webhook-id'])
    for (const req of r.requests) expect(verify(pharmacy.secret, req).id).toBe(outcomeId)
    const [announced] = await writebackEvents(deliveryId)
    expect(announced).toMatchObject({
      type: 'writeback.failed',
      data: { outcome_event_id: outcomeId, outcome: 'delivery.delivered', attempts, status_code: 500 },
    })
  })
})

describe('a writeback URL is checked at registration like a webhook URL (SSRF)', () => {
  let api: TestApi
  let admin: string
  let writebacks: () => Promise<number>
  beforeAll(async () => {
    api = await startTestService({ WEBHOOK_ALLOW_PRIVATE: 'false' })
    admin = await api.adminToken()
    writebacks = async () =>
      (await api.service.db.selectFrom('webhook_endpoints').select('id').where('kind', '=', 'writeback').execute()).length
  })
  afterAll(() => api.stop())

  const register = (url: string) =>
    api.post('/v1/pharmacies', admin, {
      name: 'Writeback Pharmacy',
      address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
      writeback: { url },
    })

  it.each([
    ['plain http', 'http://pharmacy.example.com/outcomes'],
    ['loopback', 'https://127.0.0.1/outcomes'],
    ['RFC 1918', 'https://10.0.0.1/outcomes'],
    ['cloud metadata', 'https://169.254.169.254/latest/meta-data'],
    ['localhost by name', 'https://localhost/outcomes'],
    ['credentials in the URL', 'https://user:pass@93.184.215.14/outcomes'],
  ])('%s: %s → 422 at /writeback/url, and no pharmacy', async (_what, url) => {
    const before = (await api.get('/v1/pharmacies?limit=100', admin)).body.data.length
    const res = await register(url)
    expect(res.status, res.text).toBe(422)
    expect(res.body).toMatchObject({ code: 'validation_failed', errors: [expect.objectContaining({ pointer: '/writeback/url' })] })
    expect((await api.get('/v1/pharmacies?limit=100', admin)).body.data.length).toBe(before)
  })

  it('accepts a public https target', async () => {
    const before = await writebacks()
    expect((await register('https://93.184.215.14/outcomes')).status).toBe(201)
    expect(await writebacks()).toBe(before + 1)
  })
})

describe('WEBHOOK_ALLOW_PRIVATE lets a writeback URL be plain http and private, as for webhooks', () => {
  it('accepts http://127.0.0.1', async () => {
    const api = await startTestService({ WEBHOOK_ALLOW_PRIVATE: 'true' })
    try {
      const admin = await api.adminToken()
      const res = await api.pharmacy(admin, { writeback: { url: 'http://127.0.0.1:9/outcomes' } })
      expect(res.id).toMatch(/^ph_/)
    } finally {
      await api.stop()
    }
  })
})
