import { Webhook } from 'standardwebhooks'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore } from '../helpers/stores.js'
import { waitFor } from '../helpers/wait.js'
import { startReceiver, type Receiver, type ReceivedRequest } from '../webhooks/receiver.js'

// Standard Webhooks v1a: an endpoint may be signed with the service's Ed25519 keys, published at
// /.well-known/webhook-keys.json, and a subscriber verifies with no shared secret. The proof is
// WebCrypto's Ed25519 (not the node:crypto sign the service uses), over real HTTP. The SDK's
// verifyWebhook with a key set: sdk/test/webhooks-v1a.test.ts.

type Jwk = { kty: string; crv: string; x: string; kid: string; alg: string; use: string; d?: string }

const { url: pgUrl } = await reachablePostgres()
const stores = [sqliteStore, ...(pgUrl ? [postgresStore(pgUrl)] : [])]
afterAll(async () => {
  for (const store of stores) await store.cleanup()
})

/** WebCrypto Ed25519 (RFC 8032) over `${id}.${timestamp}.${body}`: does this signature verify under this key? */
async function webCryptoVerifies(jwk: Jwk, signature: string, id: string, timestamp: string, body: string | Buffer): Promise<boolean> {
  const key = await crypto.subtle.importKey('jwk', { kty: jwk.kty, crv: jwk.crv, x: jwk.x }, { name: 'Ed25519' }, false, ['verify'])
  const signed = Buffer.concat([Buffer.from(`${id}.${timestamp}.`), Buffer.from(body)])
  return crypto.subtle.verify('Ed25519', key, Buffer.from(signature, 'base64'), signed)
}

const v1aSignatures = (req: ReceivedRequest) =>
  String(req.headers['webhook-signature'])
    .split(' ')
    .map((s) => {
      expect(s).toMatch(/^v1a,[A-Za-z0-9+/]+={0,2}$/) // v1a only: nothing a shared secret could check
      return s.slice(4)
    })

for (const store of stores)
  describe(`v1a (Ed25519) webhooks on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let baseUrl: string
    let pharmacyId: string
    const receivers: Receiver[] = []
    beforeAll(async () => {
      api = await store.start()
      const { httpPort } = await api.service.start()
      baseUrl = `http://127.0.0.1:${httpPort}`
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
    })
    afterAll(async () => {
      await Promise.all(receivers.map((r) => r.close()))
      await api?.stop()
    })

    const keySet = async () => {
      const res = await fetch(`${baseUrl}/.well-known/webhook-keys.json`)
      expect(res.status).toBe(200)
      expect(res.headers.get('cache-control')).toBe('public, max-age=300')
      return (await res.json()) as { keys: Jwk[] }
    }

    /** An endpoint with this scheme on a fresh receiver, and the first event it receives. */
    async function endpointReceiving(scheme?: 'v1' | 'v1a') {
      const receiver = await startReceiver()
      receivers.push(receiver)
      const res = await fetch(`${baseUrl}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          url: receiver.url,
          events: ['delivery.created'],
          pharmacy_id: pharmacyId,
          ...(scheme ? { signature_scheme: scheme } : {}),
        }),
      })
      const endpoint = (await res.json()) as { id: string; secret: string; signature_scheme: string }
      expect(res.status, JSON.stringify(endpoint)).toBe(201)
      await api.prescription(admin, { pharmacy_id: pharmacyId })
      await waitFor(() => receiver.requests.length >= 1, 5_000, 'the webhook')
      return { endpoint, receiver, request: receiver.requests[0]! }
    }

    it('publishes its Ed25519 public keys, never a private member', async () => {
      const { keys } = await keySet()
      expect(keys).toHaveLength(1)
      expect(keys[0]).toEqual({
        kty: 'OKP',
        crv: 'Ed25519',
        x: expect.stringMatching(/^[\w-]{43}$/),
        kid: expect.stringMatching(/^whk_/),
        alg: 'EdDSA',
        use: 'sig',
      })
    })

    it('signs a v1a endpoint with v1a only; WebCrypto verifies it under the published key and refuses a changed byte', async () => {
      const { endpoint, request } = await endpointReceiving('v1a')
      expect(endpoint.signature_scheme).toBe('v1a')
      const { keys } = await keySet()
      const [signature, ...others] = v1aSignatures(request)
      expect(others).toHaveLength(0)
      const id = String(request.headers['webhook-id'])
      const timestamp = String(request.headers['webhook-timestamp'])
      expect(await webCryptoVerifies(keys[0]!, signature!, id, timestamp, request.body)).toBe(true)

      // One byte changed anywhere — body, id, timestamp, signature — and it no longer verifies.
      const body = Buffer.from(request.body)
      const middle = body.length >> 1
      body[middle] = body[middle]! ^ 0x01
      expect(await webCryptoVerifies(keys[0]!, signature!, id, timestamp, body)).toBe(false)
      expect(await webCryptoVerifies(keys[0]!, signature!, `${id}x`, timestamp, request.body)).toBe(false)
      expect(await webCryptoVerifies(keys[0]!, signature!, id, String(Number(timestamp) + 1), request.body)).toBe(false)
      const flipped = Buffer.from(signature!, 'base64')
      flipped[0]! ^= 0x80
      expect(await webCryptoVerifies(keys[0]!, flipped.toString('base64'), id, timestamp, request.body)).toBe(false)

      // The endpoint's HMAC secret verifies nothing: there is no v1 signature to check.
      expect(() => new Webhook(endpoint.secret).verify(request.body, request.headers as Record<string, string>)).toThrow()
    })

    it('v1 (HMAC) stays the default', async () => {
      const { endpoint, request } = await endpointReceiving()
      expect(endpoint.signature_scheme).toBe('v1')
      expect(String(request.headers['webhook-signature'])).toMatch(/^v1,/)
      expect(new Webhook(endpoint.secret).verify(request.body, request.headers as Record<string, string>)).toMatchObject({
        type: 'delivery.created',
      })
    })

    it('rotates with an overlap: the new key is published and both sign until the old one retires', async () => {
      const [old] = (await keySet()).keys
      const rotated = await fetch(`${baseUrl}/v1/webhook-signing-keys/rotate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ overlap_s: 3_600 }),
      })
      const answer = (await rotated.json()) as { kid: string; activates_at: string; previous_retires_at: string }
      expect(rotated.status, JSON.stringify(answer)).toBe(200)
      expect(Date.parse(answer.previous_retires_at) - Date.parse(answer.activates_at)).toBe(3_600_000)
      const { keys } = await keySet()
      expect(keys.map((k) => k.kid)).toEqual([old!.kid, answer.kid])

      // A subscriber holding only the old key set still verifies; one holding the new set too.
      const { request } = await endpointReceiving('v1a')
      const signatures = v1aSignatures(request)
      expect(signatures).toHaveLength(2)
      const id = String(request.headers['webhook-id'])
      const timestamp = String(request.headers['webhook-timestamp'])
      for (const key of keys) {
        const verdicts = await Promise.all(signatures.map((s) => webCryptoVerifies(key, s, id, timestamp, request.body)))
        expect(verdicts.filter(Boolean)).toHaveLength(1)
      }

      // With no overlap the key before retires at once: it leaves the key set and signs nothing more.
      const again = await fetch(`${baseUrl}/v1/webhook-signing-keys/rotate`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ overlap_s: 0 }),
      })
      const newest = ((await again.json()) as { kid: string }).kid
      const after = (await keySet()).keys.map((k) => k.kid)
      expect(after).not.toContain(answer.kid)
      expect(after).toContain(newest)
    })

    it('only an unrestricted client rotates the webhook keys', async () => {
      const client = (
        await api.post('/v1/oauth/clients', admin, {
          client_name: 'Pharmacy back office',
          grant_types: ['client_credentials'],
          scope: 'webhooks:write',
          pharmacy_id: pharmacyId,
        })
      ).body
      const token = await api.tokenFor(client.client_id, client.client_secret)
      const res = await api.post('/v1/webhook-signing-keys/rotate', token, {})
      expect(res.status).toBe(403)
      expect(
        (await api.post('/v1/webhooks', admin, { url: 'http://127.0.0.1:9/x', events: ['*'], signature_scheme: 'v2' })).body,
      ).toMatchObject({
        errors: [{ pointer: '/signature_scheme' }],
      })
    })
  })
