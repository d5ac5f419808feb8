import http from 'node:http'
import type { LookupAddress } from 'node:dns'
import { afterEach, describe, expect, it } from 'vitest'
import { sendWebhook } from '../../src/webhooks/http-sender.js'
import {
  assertPublicUrl,
  classifyAddress,
  createGuardedLookup,
  WebhookTargetRefusedError,
  type ResolveHost,
} from '../../src/webhooks/ssrf.js'
import { startReceiver, type Receiver } from './receiver.js'

const resolvesTo =
  (...addresses: string[]): ResolveHost =>
  async () =>
    addresses.map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 }))

async function refusal(url: string, resolve?: ResolveHost): Promise<WebhookTargetRefusedError> {
  const err = await assertPublicUrl(url, { allowPrivate: false, resolve }).then(
    () => null,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(WebhookTargetRefusedError)
  return err as WebhookTargetRefusedError
}

describe('address classes', () => {
  it.each([
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.1.2.3', 'private'],
    ['172.16.0.1', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrier_grade_nat'],
    ['169.254.10.10', 'link_local'],
    ['fe80::1', 'link_local'],
    ['169.254.169.254', 'metadata'],
    ['fd00:ec2::254', 'metadata'],
    ['100.100.100.200', 'metadata'],
    ['fd12:3456::1', 'unique_local'],
    ['fec0::1', 'site_local'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['::ffff:127.0.0.1', 'loopback'], // IPv4-mapped
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'metadata'],
    ['::ffff:0:10.0.0.1', 'private'], // RFC 6145
    ['64:ff9b::10.0.0.1', 'private'], // NAT64 of a private address
    ['2002:c0a8:0101::1', 'private'], // 6to4 of 192.168.1.1
    ['::127.0.0.1', 'reserved'], // deprecated IPv4-compatible ::7f00:1, not IPv4-mapped
    ['::7f00:1', 'reserved'],
    ['fe80::1%eth0', 'link_local'],
    ['127.1', 'invalid'], // never produced by DNS or the URL parser
    ['2001:0:4136:e378::1', 'tunnel'], // Teredo
    ['not-an-ip', 'invalid'],
  ])('%s is %s', (address, cls) => {
    expect(classifyAddress(address)).toBe(cls)
  })

  it.each(['8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '64:ff9b::808:808', '2002:0808:0808::1', '::ffff:8.8.8.8'])(
    '%s is public',
    (address) => {
      expect(classifyAddress(address)).toBe('public')
    },
  )
})

describe('registration check', () => {
  it('accepts an https URL whose host resolves to public addresses only', async () => {
    await expect(
      assertPublicUrl('https://hooks.example.com/rx', {
        allowPrivate: false,
        resolve: resolvesTo('93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'),
      }),
    ).resolves.toBeUndefined()
    await expect(assertPublicUrl('https://8.8.8.8/rx', { allowPrivate: false })).resolves.toBeUndefined()
  })

  it('requires https', async () => {
    expect((await refusal('http://hooks.example.com/')).reason).toBe('scheme_not_allowed')
    expect((await refusal('ftp://hooks.example.com/')).reason).toBe('scheme_not_allowed')
    expect((await refusal('not a url')).reason).toBe('invalid_url')
  })

  it('refuses credentials in the URL', async () => {
    expect((await refusal('https://user:pw@hooks.example.com/', resolvesTo('8.8.8.8'))).reason).toBe('credentials_in_url')
  })

  it.each([
    ['https://127.0.0.1/', 'loopback'],
    ['https://[::1]/', 'loopback'],
    ['https://2130706433/', 'loopback'], // decimal form of 127.0.0.1
    ['https://0x7f.1/', 'loopback'], // hex + short form
    ['https://[::ffff:127.0.0.1]/', 'loopback'],
    ['https://10.0.0.8:8443/', 'private'],
    ['https://169.254.169.254/latest/meta-data/', 'metadata'],
    ['https://[fd00:ec2::254]/', 'metadata'],
    ['https://100.64.1.1/', 'carrier_grade_nat'],
    ['https://[fe80::1]/', 'link_local'],
    ['https://[fc00::1]/', 'unique_local'],
    ['https://0.0.0.0/', 'unspecified'],
    ['https://239.1.1.1/', 'multicast'],
  ])('refuses %s (%s)', async (url, reason) => {
    const err = await refusal(url)
    expect(err.reason).toBe(reason)
    expect(err.message).not.toContain(err.address ?? '-') // the address itself is not echoed back
  })

  it('refuses a name when any of its addresses is not public', async () => {
    const err = await refusal('https://hooks.example.com/', resolvesTo('8.8.8.8', '10.0.0.7'))
    expect(err.reason).toBe('private')
    expect(err.address).toBe('10.0.0.7')
    expect(err.message).toBe('webhook host resolves to a non-public address (private)')
  })

  it('refuses localhost, which resolves to loopback', async () => {
    expect((await refusal('https://localhost/')).reason).toBe('loopback')
  })

  it('refuses names that do not resolve', async () => {
    expect((await refusal('https://nothing.invalid/')).reason).toBe('unresolvable')
    expect((await refusal('https://hooks.example.com/', resolvesTo())).reason).toBe('unresolvable')
  })

  it('WEBHOOK_ALLOW_PRIVATE allows plain http and private targets, but still only http(s)', async () => {
    for (const url of ['http://127.0.0.1:3000/hook', 'http://localhost/', 'https://10.0.0.1/', 'http://[::1]/'])
      await expect(assertPublicUrl(url, { allowPrivate: true })).resolves.toBeUndefined()
    await expect(assertPublicUrl('file:///etc/passwd', { allowPrivate: true })).rejects.toThrow(WebhookTargetRefusedError)
  })
})

describe('connect-time guard', () => {
  let receiver: Receiver
  afterEach(() => receiver?.close())

  function get(url: string, lookup = createGuardedLookup()): Promise<number | Error> {
    return new Promise((resolve) => {
      http
        .get(url, { lookup, agent: false }, (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        .on('error', resolve)
    })
  }

  it('refuses a host name that resolves to 127.0.0.1 before connecting', async () => {
    receiver = await startReceiver()
    const port = new URL(receiver.url).port
    const result = await get(`http://localhost:${port}/`)
    expect(result).toBeInstanceOf(WebhookTargetRefusedError)
    expect((result as WebhookTargetRefusedError).reason).toBe('loopback')
    expect(receiver.connections).toBe(0)
  })

  it('catches DNS rebinding: public at registration, loopback at connect time', async () => {
    receiver = await startReceiver()
    let calls = 0
    const rebinding: ResolveHost = async () => [{ address: calls++ === 0 ? '93.184.215.14' : '127.0.0.1', family: 4 }]
    await assertPublicUrl('https://rebind.example/', { allowPrivate: false, resolve: rebinding })
    const port = new URL(receiver.url).port
    const result = await get(`http://rebind.example:${port}/`, createGuardedLookup(rebinding))
    expect((result as WebhookTargetRefusedError).reason).toBe('loopback')
    expect(receiver.connections).toBe(0)
  })

  it('hands public addresses on to the socket layer, one or all (happy eyeballs)', async () => {
    const lookup = createGuardedLookup(resolvesTo('8.8.8.8', '2001:4860:4860::8888'))
    const lookupAsync = (options: { all?: boolean; family?: number }) =>
      new Promise<unknown[]>((resolve) => lookup('x.test', options, (...args) => resolve(args)))
    expect(await lookupAsync({ all: true })).toEqual([
      null,
      [
        { address: '8.8.8.8', family: 4 },
        { address: '2001:4860:4860::8888', family: 6 },
      ],
    ])
    expect(await lookupAsync({})).toEqual([null, '8.8.8.8', 4])
    expect(await lookupAsync({ family: 6 })).toEqual([null, '2001:4860:4860::8888', 6])
  })

  it('the sender refuses localhost and private IP literals unless WEBHOOK_ALLOW_PRIVATE', async () => {
    receiver = await startReceiver()
    const port = new URL(receiver.url).port
    const base = { headers: {}, body: '{}', timeoutMs: 2_000 }
    const viaName = await sendWebhook({ ...base, url: `https://localhost:${port}/`, allowPrivate: false })
    const viaLiteral = await sendWebhook({ ...base, url: `https://127.0.0.1:${port}/`, allowPrivate: false })
    const viaHttp = await sendWebhook({ ...base, url: `http://8.8.8.8/`, allowPrivate: false })
    expect(viaName).toMatchObject({
      success: false,
      status: null,
      error: 'refused: webhook host resolves to a non-public address (loopback)',
    })
    expect(viaLiteral).toMatchObject({
      success: false,
      status: null,
      error: 'refused: webhook host resolves to a non-public address (loopback)',
    })
    expect(viaHttp).toMatchObject({ success: false, error: 'refused: webhook URL must use https' })
    expect(receiver.connections).toBe(0)
    const allowed = await sendWebhook({ ...base, url: `http://localhost:${port}/`, allowPrivate: true })
    expect(allowed).toMatchObject({ success: true, status: 200 })
  })
})
