import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRxtraceClient, verifyWebhook, WebhookVerificationError, type Event } from '@rxtrace/sdk'
import { startReceiver, type Receiver } from '../../test/webhooks/receiver.js'
import { waitFor } from '../../test/helpers/wait.js'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

describe('verifyWebhook on requests the service really sent', () => {
  let api: TestApi
  let receiver: Receiver
  let secret: string
  let rotatedSecret: string
  beforeAll(async () => {
    const started = await listeningService()
    api = started.api
    receiver = await startReceiver()
    const rx = createRxtraceClient({ baseUrl: started.baseUrl, auth: { clientId: ADMIN.id, clientSecret: ADMIN.secret } })
    const hook = await rx.api.POST('/v1/webhooks', { body: { url: `${receiver.url}/hooks`, events: ['delivery.created'] } })
    secret = hook.data!.secret!
    const pharmacy = await api.pharmacy(await api.adminToken())
    await api.prescription(await api.adminToken(), { pharmacy_id: pharmacy.id })
    await waitFor(() => receiver.requests.length >= 1)
    rotatedSecret = (await rx.api.POST('/v1/webhooks/{id}/rotate-secret', { params: { path: { id: hook.data!.id } } })).data!.secret!
    await api.prescription(await api.adminToken(), { pharmacy_id: pharmacy.id })
    await waitFor(() => receiver.requests.length >= 2)
  })
  afterAll(async () => {
    await receiver?.close()
    await api?.stop()
  })

  const headersOf = (i: number) => receiver.requests[i]!.headers as Record<string, string>

  it('answers the event of a genuine request, as the standardwebhooks package does', async () => {
    const { body } = receiver.requests[0]!
    const event = await verifyWebhook<Event>(body, headersOf(0), secret)
    expect(event).toMatchObject({ type: 'delivery.created', api_version: 'v1' })
    expect(new Webhook(secret).verify(body, headersOf(0))).toEqual(event)
    expect(await verifyWebhook(body, new Headers(headersOf(0)), secret)).toEqual(event) // a fetch Headers works too
  })

  it('refuses an altered body, another secret, or a missing header', async () => {
    const { body } = receiver.requests[0]!
    await expect(verifyWebhook(body.replace('delivery.created', 'delivery.cancelled'), headersOf(0), secret)).rejects.toThrow(
      WebhookVerificationError,
    )
    await expect(verifyWebhook(body, headersOf(0), `whsec_${btoa('another secret of 32 bytes length')}`)).rejects.toThrow(
      'no signature matches',
    )
    const { 'webhook-signature': _, ...unsigned } = headersOf(0)
    await expect(verifyWebhook(body, unsigned, secret)).rejects.toThrow('missing')
  })

  it('refuses a timestamp outside the tolerance either way, and accepts it inside', async () => {
    const { body } = receiver.requests[0]!
    const sentAt = Number(headersOf(0)['webhook-timestamp']) * 1000
    await expect(verifyWebhook(body, headersOf(0), secret, { now: () => sentAt + 301_000 })).rejects.toThrow('too old')
    await expect(verifyWebhook(body, headersOf(0), secret, { now: () => sentAt - 301_000 })).rejects.toThrow('future')
    await expect(verifyWebhook(body, headersOf(0), secret, { now: () => sentAt + 3_000_000, toleranceS: 3_600 })).resolves.toMatchObject({
      type: 'delivery.created',
    })
  })

  it('during a rotation, verifies with the old secret or the new one', async () => {
    const { body } = receiver.requests[1]!
    expect(headersOf(1)['webhook-signature']!.split(' ')).toHaveLength(2)
    await expect(verifyWebhook(body, headersOf(1), secret)).resolves.toMatchObject({ type: 'delivery.created' })
    await expect(verifyWebhook(body, headersOf(1), rotatedSecret)).resolves.toMatchObject({ type: 'delivery.created' })
    await expect(verifyWebhook(receiver.requests[0]!.body, headersOf(0), [rotatedSecret, secret])).resolves.toMatchObject({
      type: 'delivery.created',
    })
  })
})
