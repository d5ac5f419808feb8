import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { statuses, type ReceivedRequest, type Receiver } from './receiver.js'
import { useWebhookService } from './webhook-service.js'

type Envelope = { id: string; type: string; pharmacy_id: string; fleet_id?: string | null; delivery_id: string; seq: number }

const signatureHeaders = (req: ReceivedRequest) => ({
  'webhook-id': String(req.headers['webhook-id']),
  'webhook-timestamp': String(req.headers['webhook-timestamp']),
  'webhook-signature': String(req.headers['webhook-signature']),
})
const envelopes = (receiver: Receiver) => receiver.requests.map((r) => JSON.parse(r.body) as Envelope)

describe('webhook endpoints over the API (SPEC §7)', () => {
  const fixture = useWebhookService('50ms,50ms,50ms')
  const { receiver } = fixture
  let api: TestApi
  let admin: string
  beforeAll(() => void ({ api, admin } = fixture))

  /** Registers an endpoint as `token`; fails the test unless it was created. */
  async function register(token: string, body: Record<string, unknown>) {
    const res = await api.post('/v1/webhooks', token, body)
    expect(res.status, res.text).toBe(201)
    return res.body as { id: string; secret: string; pharmacy_id: string | null; enabled: boolean }
  }

  it('creates, reads, lists, changes and deletes an endpoint; the secret is shown once and never again', async () => {
    const pharmacy = await api.pharmacy(admin)
    const created = await api.post('/v1/webhooks', admin, {
      url: 'http://127.0.0.1:9/hooks',
      events: ['delivery.created'],
      description: 'dispatch board',
      pharmacy_id: pharmacy.id,
    })
    expect(created.status).toBe(201)
    expect(created.body).toMatchObject({
      id: expect.stringMatching(/^wh_/),
      url: 'http://127.0.0.1:9/hooks',
      events: ['delivery.created'],
      description: 'dispatch board',
      enabled: true,
      disabled_reason: null,
      pharmacy_id: pharmacy.id,
    })
    const { id, secret } = created.body as { id: string; secret: string }
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32,}$/)

    const read = await api.get(`/v1/webhooks/${id}`, admin)
    expect(read.status).toBe(200)
    expect(read.body).toMatchObject({ id, url: 'http://127.0.0.1:9/hooks', enabled: true })
    const list = await api.get('/v1/webhooks?limit=100', admin)
    expect(list.body.data.map((e: { id: string }) => e.id)).toContain(id)
    const patched = await api.request('PATCH', `/v1/webhooks/${id}`, {
      token: admin,
      body: { events: ['delivery.created', 'delivery.delivered'], description: 'board v2' },
    })
    expect(patched.status).toBe(200)
    expect(patched.body).toMatchObject({ id, events: ['delivery.created', 'delivery.delivered'], description: 'board v2' })
    for (const res of [read, list, patched]) {
      expect(res.text).not.toContain(secret)
      expect(res.text).not.toContain('whsec_')
      expect(res.text).not.toMatch(/"secret"/)
    }

    const removed = await api.request('DELETE', `/v1/webhooks/${id}`, { token: admin })
    expect(removed.status).toBe(204)
    expect((await api.get(`/v1/webhooks/${id}`, admin)).status).toBe(404)
  })

  it('refuses an unknown event name with 422 pointing at it', async () => {
    const res = await api.post('/v1/webhooks', admin, {
      url: 'http://127.0.0.1:9/hooks',
      events: ['delivery.created', 'delivery.teleported'],
    })
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/events/1' })])
    const endpoint = await register(admin, { url: 'http://127.0.0.1:9/', events: ['delivery.created'] })
    const patch = await api.request('PATCH', `/v1/webhooks/${endpoint.id}`, { token: admin, body: { events: ['nope'] } })
    expect(patch.status).toBe(422)
    expect(patch.body.errors).toEqual([expect.objectContaining({ pointer: '/events/0' })])
    await api.request('DELETE', `/v1/webhooks/${endpoint.id}`, { token: admin })
  })

  it('events ["*"] hears every event type of its tenant', async () => {
    const r = await receiver()
    const pharmacy = await api.pharmacy(admin)
    await register(admin, { url: r.url, events: ['*'], pharmacy_id: pharmacy.id })
    const { fleetId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId })
    await api.post(`/v1/deliveries/${rx.delivery_id}/cancel`, admin, { reason: 'patient moved' })
    await waitFor(() => r.requests.length >= 3, 5_000, 'three events')
    expect(
      envelopes(r)
        .map((e) => e.type)
        .sort(),
    ).toEqual(['delivery.cancelled', 'delivery.created', 'delivery.dispatched'])
  })

  it('a pharmacy-restricted client sees only its endpoints and hears only its pharmacy', async () => {
    const mine = await api.pharmacy(admin)
    const theirs = await api.pharmacy(admin)
    const client = await api.post('/v1/oauth/clients', admin, {
      client_name: 'Main St dispatch',
      scope: 'webhooks:read webhooks:write prescriptions:write deliveries:read',
      pharmacy_id: mine.id,
    })
    expect(client.status, client.text).toBe(201)
    const tenant = await api.tokenFor(client.body.client_id, client.body.client_secret)

    const myReceiver = await receiver()
    const theirReceiver = await receiver()
    const myEndpoint = await register(tenant, { url: myReceiver.url, events: ['delivery.created'] })
    expect(myEndpoint.pharmacy_id).toBe(mine.id)
    const theirEndpoint = await register(admin, { url: theirReceiver.url, events: ['delivery.created'], pharmacy_id: theirs.id })

    // Naming another tenant is refused rather than silently rewritten.
    expect((await api.post('/v1/webhooks', tenant, { url: myReceiver.url, events: ['*'], pharmacy_id: theirs.id })).status).toBe(422)
    const listed = await api.get('/v1/webhooks?limit=100', tenant)
    expect(listed.body.data.map((e: { id: string }) => e.id)).toEqual([myEndpoint.id])
    expect((await api.get(`/v1/webhooks/${theirEndpoint.id}`, tenant)).status).toBe(404)
    expect((await api.request('PATCH', `/v1/webhooks/${theirEndpoint.id}`, { token: tenant, body: { enabled: false } })).status).toBe(404)
    expect((await api.request('DELETE', `/v1/webhooks/${theirEndpoint.id}`, { token: tenant })).status).toBe(404)
    expect((await api.post(`/v1/webhooks/${theirEndpoint.id}/rotate-secret`, tenant)).status).toBe(404)
    expect((await api.get(`/v1/webhooks/${theirEndpoint.id}/attempts`, tenant)).status).toBe(404)

    const myRx = await api.prescription(tenant, {})
    const theirRx = await api.prescription(admin, { pharmacy_id: theirs.id })
    await waitFor(() => myReceiver.requests.length >= 1 && theirReceiver.requests.length >= 1, 5_000, 'both deliveries')
    expect(envelopes(myReceiver).map((e) => [e.pharmacy_id, e.delivery_id])).toEqual([[mine.id, myRx.delivery_id]])
    expect(envelopes(theirReceiver).map((e) => [e.pharmacy_id, e.delivery_id])).toEqual([[theirs.id, theirRx.delivery_id]])
  })

  it("a fleet-restricted client's endpoint hears its fleet's deliveries and never another fleet's", async () => {
    const pharmacy = await api.pharmacy(admin)
    const mine = await api.fleetWithDriver(admin)
    const theirs = await api.fleetWithDriver(admin)
    const client = await api.post('/v1/oauth/clients', admin, {
      client_name: 'Speedy dispatch board',
      scope: 'webhooks:read webhooks:write fleet:read',
      fleet_id: mine.fleetId,
    })
    expect(client.status, client.text).toBe(201)
    const fleetToken = await api.tokenFor(client.body.client_id, client.body.client_secret)
    const myReceiver = await receiver()
    const theirReceiver = await receiver()
    const myEndpoint = await register(fleetToken, { url: myReceiver.url, events: ['*'] })
    expect(myEndpoint).toMatchObject({ fleet_id: mine.fleetId, pharmacy_id: null })
    await register(admin, { url: theirReceiver.url, events: ['*'], fleet_id: theirs.fleetId })
    // Naming another fleet is refused rather than silently rewritten.
    expect((await api.post('/v1/webhooks', fleetToken, { url: myReceiver.url, events: ['*'], fleet_id: theirs.fleetId })).status).toBe(422)

    const dispatchTo = async (fleet: { fleetId: string; driverId: string }) => {
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
      const res = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleet.fleetId, driver_id: fleet.driverId })
      expect(res.status, res.text).toBe(200)
      expect((await api.post(`/v1/deliveries/${rx.delivery_id}/cancel`, admin, { reason: 'patient moved' })).status).toBe(200)
      return rx.delivery_id
    }
    const myDelivery = await dispatchTo(mine)
    const theirDelivery = await dispatchTo(theirs)
    const typesFor = (r: Receiver, deliveryId: string) =>
      envelopes(r)
        .filter((e) => e.delivery_id === deliveryId)
        .map((e) => e.type)
        .sort()
    await waitFor(
      () =>
        typesFor(myReceiver, myDelivery).includes('delivery.cancelled') &&
        typesFor(theirReceiver, theirDelivery).includes('delivery.cancelled'),
      5_000,
      "each fleet's events",
    )
    expect(typesFor(myReceiver, myDelivery)).toEqual(expect.arrayContaining(['delivery.cancelled', 'delivery.dispatched']))
    expect(envelopes(myReceiver).map((e) => e.delivery_id)).not.toContain(theirDelivery)
    expect(envelopes(theirReceiver).map((e) => e.delivery_id)).not.toContain(myDelivery)
    expect(new Set(envelopes(myReceiver).map((e) => e.fleet_id))).toEqual(new Set([mine.fleetId]))
  })

  it('after rotate-secret, deliveries carry two v1 signatures and verify with either secret', async () => {
    const r = await receiver()
    const pharmacy = await api.pharmacy(admin)
    const endpoint = await register(admin, { url: r.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })
    const before = Date.now()
    const rotated = await api.post(`/v1/webhooks/${endpoint.id}/rotate-secret`, admin)
    expect(rotated.status).toBe(200)
    expect(rotated.body.secret).toMatch(/^whsec_/)
    expect(rotated.body.secret).not.toBe(endpoint.secret)
    const expires = Date.parse(rotated.body.previous_secret_expires_at)
    expect(expires - before).toBeGreaterThanOrEqual(24 * 3_600_000 - 5_000)
    expect(expires - before).toBeLessThanOrEqual(24 * 3_600_000 + 5_000)

    await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await waitFor(() => r.requests.length >= 1, 5_000, 'a delivery')
    const req = r.requests[0]!
    const signatures = String(req.headers['webhook-signature']).split(' ')
    expect(signatures).toHaveLength(2)
    for (const signature of signatures) expect(signature).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
    for (const secret of [endpoint.secret, rotated.body.secret as string]) {
      expect(new Webhook(secret).verify(req.body, signatureHeaders(req))).toMatchObject({ type: 'delivery.created' })
    }
    // The rotation is not a back door: the secret still appears nowhere else.
    expect((await api.get(`/v1/webhooks/${endpoint.id}`, admin)).text).not.toContain(rotated.body.secret)
  })

  it('lists attempts in the shape of SPEC §7, and redelivers a delivered event under the same webhook-id', async () => {
    const r = await receiver(statuses(500, 200))
    const pharmacy = await api.pharmacy(admin)
    const endpoint = await register(admin, { url: r.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })
    await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const attemptsOf = async () =>
      (await api.get(`/v1/webhooks/${endpoint.id}/attempts`, admin)).body.data as Array<Record<string, unknown>>
    await waitFor(async () => (await attemptsOf()).length === 2, 5_000, 'two attempts')
    const attempts = await attemptsOf()
    const eventId = String(r.requests[0]!.headers['webhook-id'])
    for (const attempt of attempts) {
      expect(Object.keys(attempt).sort()).toEqual(['at', 'attempt', 'duration_ms', 'error', 'event_id', 'id', 'status_code', 'success'])
      expect(attempt).toMatchObject({
        id: expect.stringMatching(/^att_/),
        event_id: eventId,
        at: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      })
      expect(Number.isInteger(attempt.duration_ms)).toBe(true)
    }
    expect(attempts.map((a) => [a.attempt, a.status_code, a.error, a.success])).toEqual([
      [1, 500, null, false],
      [2, 200, null, true],
    ])

    const redelivered = await api.post(`/v1/events/${eventId}/redeliver`, admin)
    expect(redelivered.status).toBe(202)
    expect(redelivered.body).toEqual({ event_id: eventId, endpoint_ids: [endpoint.id] })
    await waitFor(() => r.requests.length === 3, 5_000, 'the redelivery')
    expect(r.requests.map((req) => req.headers['webhook-id'])).toEqual([eventId, eventId, eventId])
    expect(r.requests[2]!.body).toBe(r.requests[1]!.body)
    await waitFor(async () => (await attemptsOf()).length === 3, 2_000, 'the third attempt recorded')
    expect((await attemptsOf())[2]).toMatchObject({ event_id: eventId, status_code: 200, success: true })

    expect((await api.post('/v1/events/evt_01jzzzzzzzzzzzzzzzzzzzzzzz/redeliver', admin)).status).toBe(404)
  })

  it('GET /v1/events?after= lists what was committed after the named event', async () => {
    const pharmacy = await api.pharmacy(admin)
    const { fleetId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const first = (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, admin)).body.data[0] as Envelope
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId })
    await api.post(`/v1/deliveries/${rx.delivery_id}/cancel`, admin, { reason: 'duplicate order' })
    const after = await api.get(`/v1/events?after=${first.id}&delivery_id=${rx.delivery_id}`, admin)
    expect(after.status).toBe(200)
    expect(after.body.data.map((e: Envelope) => [e.type, e.seq])).toEqual([
      ['delivery.dispatched', 2],
      ['delivery.cancelled', 3],
    ])
    const everything = await api.get(`/v1/events?after=${first.id}&limit=100`, admin)
    expect(everything.body.data.map((e: Envelope) => e.id)).not.toContain(first.id)
  })

  it('410 Gone disables the endpoint and says why', async () => {
    const r = await receiver(statuses(410))
    const pharmacy = await api.pharmacy(admin)
    const endpoint = await register(admin, { url: r.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })
    await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await waitFor(async () => !(await api.get(`/v1/webhooks/${endpoint.id}`, admin)).body.enabled, 5_000, 'the endpoint disabled')
    expect((await api.get(`/v1/webhooks/${endpoint.id}`, admin)).body).toMatchObject({ enabled: false, disabled_reason: 'gone' })

    // A disabled endpoint hears nothing more, and the one 410 was not retried: by the time an
    // endpoint registered beside it has the next event, that event's rows have all been claimed.
    const witness = await receiver()
    await register(admin, { url: witness.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })
    await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await waitFor(() => witness.requests.length === 1, 5_000, 'the event at the endpoint beside it')
    expect(r.requests).toHaveLength(1)
  })
})

describe('webhook registration refuses private targets (SPEC §7, SSRF)', () => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await startTestService({ WEBHOOK_ALLOW_PRIVATE: 'false' })
    admin = await api.adminToken()
  })
  afterAll(() => api.stop())

  it.each([
    ['plain http', 'http://hooks.example.com/rx'],
    ['loopback', 'https://127.0.0.1/hooks'],
    ['RFC 1918', 'https://10.0.0.1/hooks'],
    ['cloud metadata', 'https://169.254.169.254/latest/meta-data'],
    ['localhost by name', 'https://localhost/hooks'],
  ])('%s: %s → 422 at /url', async (_what, url) => {
    const res = await api.post('/v1/webhooks', admin, { url, events: ['*'] })
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/url' })])
  })

  it('refuses the same targets when an endpoint is changed', async () => {
    const created = await api.post('/v1/webhooks', admin, { url: 'https://93.184.215.14/hooks', events: ['*'] })
    expect(created.status, created.text).toBe(201)
    const res = await api.request('PATCH', `/v1/webhooks/${created.body.id}`, { token: admin, body: { url: 'https://10.0.0.1/hooks' } })
    expect(res.status).toBe(422)
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/url' })])
  })
})
