import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { slowAnswer, type Receiver } from './receiver.js'
import { useWebhookService } from './webhook-service.js'

type Envelope = { id: string; type: string; created_at: string; delivery_id: string; seq: number; data: Record<string, unknown> }

/** A port nobody listens on: what a receiver that is down looks like (ECONNREFUSED). */
async function closedPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Starts answering 200 on a given port: the receiver coming back up. */
async function receiverOn(port: number): Promise<Receiver> {
  const requests: Receiver['requests'] = []
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString(),
        at: Date.now(),
      })
      res.end('ok')
    })
  })
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    connections: 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

describe('webhook delivery when receivers misbehave', () => {
  // Backoff that covers a few seconds of outage with room to spare (22 attempts over ≈ 17 s).
  const fixture = useWebhookService('100ms,200ms,300ms,500ms,500ms,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s,1s')
  const { receiver, track } = fixture
  let api: TestApi
  let admin: string
  beforeAll(() => void ({ api, admin } = fixture))

  /** Every attempt recorded for an endpoint, following the pages. */
  async function allAttempts(endpointId: string) {
    const all: Array<{ event_id: string; success: boolean; error: string | null }> = []
    let cursor: string | null = null
    do {
      const page: { body: { data: typeof all; next_cursor: string | null } } = await api.get(
        `/v1/webhooks/${endpointId}/attempts?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
        admin,
      )
      all.push(...page.body.data)
      cursor = page.body.next_cursor
    } while (cursor)
    return all
  }

  /** Walks a delivery from queue to patient: six events, seq 1‥6. */
  async function deliverOne(pharmacyId: string, fleet: { fleetId: string; driverId: string }, patientId = 'pt_123') {
    const rx = await api.prescription(admin, { pharmacy_id: pharmacyId, patient_id: patientId })
    for (const [action, body] of [
      ['dispatch', { fleet_id: fleet.fleetId, driver_id: fleet.driverId }],
      ['pickup', { from: pharmacyId, to: fleet.driverId, signature: 'signed' }],
      ['deliver', { verification: { method: 'otp', evidence: '123456' } }],
    ] as const) {
      const res = await api.post(`/v1/deliveries/${rx.delivery_id}/${action}`, admin, body)
      expect(res.status, `${action}: ${res.text}`).toBe(200)
    }
    return rx.delivery_id
  }

  it('a receiver that is down for a while, then up, gets every event: per delivery, seq 1‥n without gaps', async () => {
    const port = await closedPort()
    const pharmacy = await api.pharmacy(admin)
    const fleet = await api.fleetWithDriver(admin)
    const endpoint = await api.post('/v1/webhooks', admin, {
      url: `http://127.0.0.1:${port}/hooks`,
      events: ['*'],
      pharmacy_id: pharmacy.id,
    })
    expect(endpoint.status).toBe(201)
    const deliveries: string[] = []
    for (let i = 0; i < 5; i++) deliveries.push(await deliverOne(pharmacy.id, fleet))
    const expected: Envelope[] = []
    for (const id of deliveries) expected.push(...(await api.get(`/v1/events?delivery_id=${id}`, admin)).body.data)
    expect(expected).toHaveLength(5 * 6)

    // Down: every event has failed at least once (connection refused) before the receiver is back.
    await waitFor(
      async () => new Set((await allAttempts(endpoint.body.id)).map((a) => a.event_id)).size === expected.length,
      5_000,
      'a failed attempt for every event',
    )
    // Down a while: every event has been retried, and refused again, before the receiver is back.
    await waitFor(
      async () => {
        const failures = new Map<string, number>()
        for (const a of await allAttempts(endpoint.body.id)) failures.set(a.event_id, (failures.get(a.event_id) ?? 0) + 1)
        return failures.size === expected.length && [...failures.values()].every((n) => n >= 2)
      },
      10_000,
      'a second failed attempt for every event',
    )
    const up = track(await receiverOn(port))

    await waitFor(
      () => new Set(up.requests.map((r) => r.headers['webhook-id'])).size === expected.length,
      15_000,
      'every event after the outage',
    )
    // Once every event's success is recorded, nothing is due any more: nothing else can follow.
    await waitFor(
      async () => (await allAttempts(endpoint.body.id)).filter((a) => a.success).length >= expected.length,
      10_000,
      'a recorded success for every event',
    )
    const got = up.requests.map((r) => JSON.parse(r.body) as Envelope)
    expect(got).toHaveLength(expected.length) // exactly once each: the receiver answered 200 every time
    for (const deliveryId of deliveries) {
      const seqs = got
        .filter((e) => e.delivery_id === deliveryId)
        .map((e) => e.seq)
        .sort((a, b) => a - b)
      expect(seqs, deliveryId).toEqual([1, 2, 3, 4, 5, 6])
    }
    expect(new Set(got.map((e) => e.id))).toEqual(new Set(expected.map((e) => e.id)))
    const attempts = await allAttempts(endpoint.body.id)
    expect(attempts.filter((a) => a.success)).toHaveLength(expected.length)
    expect(attempts.filter((a) => !a.success).every((a) => a.error?.startsWith('ECONNREFUSED'))).toBe(true)
  })

  it("a receiver that sleeps 30 s does not delay another endpoint's deliveries", async () => {
    const slow = await receiver(async (_req, res) => {
      await slowAnswer(30_000)
      res.end('late')
    })
    const fast = await receiver()
    const pharmacy = await api.pharmacy(admin)
    for (const r of [slow, fast]) {
      expect((await api.post('/v1/webhooks', admin, { url: r.url, events: ['delivery.created'], pharmacy_id: pharmacy.id })).status).toBe(
        201,
      )
    }
    // More events than the slow endpoint has slots (10 per endpoint), so its lane is full.
    const count = 30
    for (let i = 0; i < count; i++) await api.prescription(admin, { pharmacy_id: pharmacy.id })

    await waitFor(() => fast.requests.length === count, 5_000, 'every event at the fast receiver')
    expect(slow.requests.length).toBeGreaterThanOrEqual(10) // the slow one really is tied up, and answered none of them
    // Closing the slow receiver's sockets ends its attempts now rather than at the 10 s timeout.
    await slow.close()
  })

  it('payloads are thin: no patient identifier in any delivered body', async () => {
    const r = await receiver()
    const pharmacy = await api.pharmacy(admin)
    await api.post('/v1/webhooks', admin, { url: r.url, events: ['*'], pharmacy_id: pharmacy.id })
    const patientId = `pt_thin_${Date.now()}`
    await deliverOne(pharmacy.id, await api.fleetWithDriver(admin), patientId)
    await waitFor(() => r.requests.length === 6, 5_000, 'six events')
    for (const req of r.requests) {
      expect(req.body).not.toContain(patientId)
      expect(req.body).not.toContain('patient_id')
    }
  })
})
