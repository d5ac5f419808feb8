import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { verifyWebhook, WebhookVerificationError, type Event, type WebhookKeySet } from '@rxtrace/sdk'
import { startReceiver, type Receiver } from '../../test/webhooks/receiver.js'
import { waitFor } from '../../test/helpers/wait.js'
import { listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

describe('verifyWebhook on v1a (Ed25519) requests the service really sent', () => {
  let api: TestApi
  let baseUrl: string
  let receiver: Receiver
  let admin: string
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
    receiver = await startReceiver()
    admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const hook = await api.post('/v1/webhooks', admin, {
      url: `${receiver.url}/hooks`,
      events: ['delivery.created'],
      signature_scheme: 'v1a',
    })
    expect(hook.status, hook.text).toBe(201)
    await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await waitFor(() => receiver.requests.length >= 1)
  })
  afterAll(async () => {
    await receiver?.close()
    await api?.stop()
  })

  const keySet = async () => (await (await fetch(`${baseUrl}/.well-known/webhook-keys.json`)).json()) as WebhookKeySet
  const headersOf = (i: number) => receiver.requests[i]!.headers as Record<string, string>

  it('answers the event given the published key set, with no shared secret', async () => {
    const { body } = receiver.requests[0]!
    const event = await verifyWebhook<Event>(body, headersOf(0), await keySet())
    expect(event).toMatchObject({ type: 'delivery.created', api_version: 'v1' })
    expect(await verifyWebhook(body, new Headers(headersOf(0)), await keySet())).toEqual(event) // a fetch Headers works too
  })

  it('refuses a changed byte, an empty key set, and an HMAC secret in place of the keys', async () => {
    const { body } = receiver.requests[0]!
    const changed = body.replace('delivery.created', 'delivery.cre4ted')
    await expect(verifyWebhook(changed, headersOf(0), await keySet())).rejects.toBeInstanceOf(WebhookVerificationError)
    await expect(verifyWebhook(body, headersOf(0), { keys: [] })).rejects.toThrow(/no v1a signature/)
    await expect(verifyWebhook(body, headersOf(0), 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')).rejects.toThrow(/no signature matches/)
  })

  it('keeps verifying with the key set cached before a rotation, during its overlap', async () => {
    const before = await keySet()
    expect((await api.post('/v1/webhook-signing-keys/rotate', admin, { overlap_s: 3600 })).status).toBe(200)
    await api.prescription(admin, { pharmacy_id: (await api.pharmacy(admin)).id })
    await waitFor(() => receiver.requests.length >= 2)
    const { body } = receiver.requests[1]!
    await expect(verifyWebhook(body, headersOf(1), before)).resolves.toMatchObject({ type: 'delivery.created' })
    const after = await keySet()
    expect(after.keys).toHaveLength(2)
    await expect(verifyWebhook(body, headersOf(1), { keys: [after.keys[1]!] })).resolves.toMatchObject({ type: 'delivery.created' })
  })
})
