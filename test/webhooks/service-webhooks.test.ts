import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { startReceiver, statuses, type Receiver } from './receiver.js'

describe('webhooks from the running service', () => {
  let api: TestApi
  let admin: string
  let receiver: Receiver
  beforeAll(async () => {
    api = await startTestService({ WEBHOOK_RETRY_SCHEDULE: '50ms,50ms,50ms' })
    await api.service.start()
    admin = await api.adminToken()
  })
  afterAll(async () => {
    await api.stop()
    await receiver?.close()
  })

  it('delivers a signed event that standardwebhooks verifies, after two failures, once as a success', async () => {
    receiver = await startReceiver(statuses(500, 500, 200))
    const pharmacy = await api.pharmacy(admin)
    const endpoint = await api.post('/v1/webhooks', admin, {
      url: `${receiver.url}/hooks`,
      events: ['delivery.created'],
      pharmacy_id: pharmacy.id,
    })
    expect(endpoint.status).toBe(201)
    expect(endpoint.body.secret).toMatch(/^whsec_/)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })

    await waitFor(() => receiver.requests.length >= 3, 5_000)
    const last = receiver.requests[2]!
    const payload = new Webhook(endpoint.body.secret).verify(last.body, {
      'webhook-id': String(last.headers['webhook-id']),
      'webhook-timestamp': String(last.headers['webhook-timestamp']),
      'webhook-signature': String(last.headers['webhook-signature']),
    }) as { type: string; delivery_id: string; seq: number }
    expect(payload).toMatchObject({ type: 'delivery.created', delivery_id: rx.delivery_id, seq: 1 })

    await waitFor(async () => (await api.get(`/v1/webhooks/${endpoint.body.id}/attempts`, admin)).body.data.length === 3, 2_000)
    const attempts = (await api.get(`/v1/webhooks/${endpoint.body.id}/attempts`, admin)).body.data
    expect(attempts.map((a: { status_code: number; success: boolean }) => [a.status_code, a.success])).toEqual([
      [500, false],
      [500, false],
      [200, true],
    ])
    // …and counted by outcome for /metrics.
    const byOutcome = async () =>
      Object.fromEntries((await api.service.metrics.webhookAttempts.get()).values.map((v) => [v.labels.outcome, v.value]))
    await expect.poll(byOutcome).toEqual({ retry: 2, success: 1 })
    expect(receiver.requests).toHaveLength(3)
  })
})
