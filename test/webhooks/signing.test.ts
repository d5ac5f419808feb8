import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { newWebhookSecret, signatureHeaders } from '../../src/webhooks/signing.js'

const body = JSON.stringify({ id: 'evt_1', type: 'delivery.created', data: { note: 'ünïcode ✓' } })
const now = () => Math.floor(Date.now() / 1000)

describe('webhook signing (Standard Webhooks)', () => {
  it('signs so that the standardwebhooks package verifies the request', () => {
    const secret = newWebhookSecret()
    const headers = signatureHeaders({ id: 'evt_1', timestampSec: now(), body, secrets: [secret] })
    expect(headers['webhook-id']).toBe('evt_1')
    expect(headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/)
    expect(new Webhook(secret).verify(body, { ...headers })).toEqual(JSON.parse(body))
  })

  it('during a rotation signs with both secrets, and each one verifies on its own', () => {
    const [current, previous] = [newWebhookSecret(), newWebhookSecret()]
    const headers = signatureHeaders({ id: 'evt_2', timestampSec: now(), body, secrets: [current, previous] })
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2)
    expect(
      headers['webhook-signature'].startsWith(
        signatureHeaders({ id: 'evt_2', timestampSec: Number(headers['webhook-timestamp']), body, secrets: [current] })[
          'webhook-signature'
        ],
      ),
    ).toBe(true)
    expect(() => new Webhook(current).verify(body, { ...headers })).not.toThrow()
    expect(() => new Webhook(previous).verify(body, { ...headers })).not.toThrow()
    expect(() => new Webhook(newWebhookSecret()).verify(body, { ...headers })).toThrow(/No matching signature/)
  })

  it('a changed body, id or timestamp no longer verifies', () => {
    const secret = newWebhookSecret()
    const headers = signatureHeaders({ id: 'evt_3', timestampSec: now(), body, secrets: [secret] })
    const hook = new Webhook(secret)
    expect(() => hook.verify(body.replace('evt_1', 'evt_9'), { ...headers })).toThrow()
    expect(() => hook.verify(body, { ...headers, 'webhook-id': 'evt_4' })).toThrow()
    expect(() => hook.verify(body, { ...headers, 'webhook-timestamp': String(Number(headers['webhook-timestamp']) - 1) })).toThrow()
  })

  it('uses the given timestamp, which receivers check for freshness', () => {
    const secret = newWebhookSecret()
    const tenMinutesAgo = now() - 600 // read once: two reads may fall either side of a second
    const stale = signatureHeaders({ id: 'evt_5', timestampSec: tenMinutesAgo, body, secrets: [secret] })
    expect(stale['webhook-timestamp']).toBe(String(tenMinutesAgo))
    expect(() => new Webhook(secret).verify(body, { ...stale })).toThrow(/too old/)
  })

  it('refuses to sign without a secret', () => {
    expect(() => signatureHeaders({ id: 'evt_6', timestampSec: now(), body, secrets: [] })).toThrow(/secret/)
  })

  it('new secrets are whsec_ + base64 of 24 random bytes', () => {
    const secrets = new Set(Array.from({ length: 50 }, newWebhookSecret))
    expect(secrets.size).toBe(50)
    for (const secret of secrets) {
      expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/)
      expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(24)
    }
  })
})
