import { Agent, request as httpRequest } from 'node:http'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type Reply, type TestApi } from '../helpers/service.js'

const ENTITY_TABLES = [
  'pharmacies',
  'prescriptions',
  'deliveries',
  'custody_events',
  'events',
  'idempotency_keys',
  'fleets',
  'drivers',
  'totes',
] as const

function expectProblem(res: Reply, status: number, code: string) {
  expect(res.status, res.text).toBe(status)
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  expect(res.body).toMatchObject({
    type: expect.any(String),
    title: expect.any(String),
    status,
    detail: expect.any(String),
    code,
    request_id: expect.any(String),
  })
}

describe('a request the API cannot accept', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string
  let deliveryId: string
  let before: Record<string, number>
  let httpPort = 0

  async function rowCounts(): Promise<Record<string, number>> {
    const counts: Record<string, number> = {}
    for (const table of ENTITY_TABLES) {
      const row = await api.service.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .executeTakeFirstOrThrow()
      counts[table] = Number(row.n)
    }
    return counts
  }

  const prescribe = (body: unknown, headers: Record<string, string> = {}) =>
    api.request('POST', '/v1/prescriptions', { token: admin, body, headers: { 'idempotency-key': `bad-${Math.random()}`, ...headers } })
  const prescribeRaw = (raw: string, headers: Record<string, string>) =>
    api.request('POST', '/v1/prescriptions', { token: admin, raw, headers: { 'idempotency-key': `bad-${Math.random()}`, ...headers } })

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    deliveryId = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
    before = await rowCounts()
  })
  afterAll(() => api.stop())

  it('answers malformed JSON with 400 invalid_json', async () => {
    expectProblem(
      await prescribeRaw('{"patient_id": "pt_1", "cold_chain": tru', { 'content-type': 'application/json' }),
      400,
      'invalid_json',
    )
    expectProblem(
      await api.request('POST', `/v1/deliveries/${deliveryId}/cancel`, {
        token: admin,
        raw: '{reason: nope}',
        headers: { 'content-type': 'application/json' },
      }),
      400,
      'invalid_json',
    )
  })

  it('answers wrong types with 422 validation_failed and a JSON pointer per field', async () => {
    const res = await prescribe({ pharmacy_id: pharmacyId, patient_id: 42, cold_chain: 'yes' })
    expectProblem(res, 422, 'validation_failed')
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/cold_chain', '/patient_id'])
    for (const error of res.body.errors) expect(error.message).toEqual(expect.any(String))
  })

  it('points into nested members and arrays', async () => {
    const res = await prescribe({
      pharmacy_id: pharmacyId,
      patient_id: 'pt_1',
      cold_chain: false,
      items: [
        { description: 'Insulin', quantity: 1 },
        { description: 'Pen', quantity: -2 },
      ],
    })
    expectProblem(res, 422, 'validation_failed')
    expect(res.body.errors).toEqual([expect.objectContaining({ pointer: '/items/1/quantity' })])
  })

  it('answers unknown enum values with 422 at the member', async () => {
    const profile = await prescribe({ pharmacy_id: pharmacyId, patient_id: 'pt_1', cold_chain: true, temperature_profile: 'tepid' })
    expectProblem(profile, 422, 'validation_failed')
    expect(profile.body.errors).toEqual([expect.objectContaining({ pointer: '/temperature_profile' })])
    const method = await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, { verification: { method: 'telepathy', evidence: 'x' } })
    expectProblem(method, 422, 'validation_failed')
    expect(method.body.errors).toEqual([expect.objectContaining({ pointer: '/verification/method' })])
    const status = await api.get('/v1/deliveries?status=LOST', admin)
    expectProblem(status, 422, 'validation_failed')
    expect(status.body.errors).toEqual([expect.objectContaining({ pointer: '/query/status' })])
  })

  it('answers unknown fields with 422 pointing at each of them', async () => {
    const res = await prescribe({ pharmacy_id: pharmacyId, patient_id: 'pt_1', cold_chain: false, colour: 'blue', priority: 1 })
    expectProblem(res, 422, 'validation_failed')
    expect(res.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/colour', '/priority'])
    const nested = await api.post(`/v1/deliveries/${deliveryId}/deliver`, admin, {
      verification: { method: 'otp', evidence: '1', pin: '2' },
    })
    expectProblem(nested, 422, 'validation_failed')
    expect(nested.body.errors).toEqual([expect.objectContaining({ pointer: '/verification/pin' })])
  })

  it('names the first 100 bad fields and counts the rest, so a body of many bad parts gets a small answer', async () => {
    // 20,000 unknown members fit in 256 KiB; named one by one they made an answer of 1 MiB.
    const unknown = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`x${i}`, 0]))
    const res = await prescribe({ pharmacy_id: pharmacyId, patient_id: 'pt_1', cold_chain: false, ...unknown })
    expectProblem(res, 422, 'validation_failed')
    expect(res.body.errors).toHaveLength(100)
    expect(res.body.errors[0]).toEqual({ pointer: '/x0', message: 'is not a known field' })
    expect(res.body.errors_omitted).toBe(19_900)
    expect(res.text.length).toBeLessThan(16 * 1024)
  })

  it('answers a pharmacy that does not exist with 422 at /pharmacy_id', async () => {
    const res = await prescribe({ pharmacy_id: 'ph_01jd0000000000000000000000', patient_id: 'pt_1', cold_chain: false })
    expectProblem(res, 422, 'validation_failed')
    expect(res.body.errors).toEqual([{ pointer: '/pharmacy_id', message: 'no pharmacy ph_01jd0000000000000000000000' }])
  })

  it('answers a body over 256 KiB with 413, whether or not it declares its length', async () => {
    const big = JSON.stringify({ pharmacy_id: pharmacyId, patient_id: 'pt_1', cold_chain: false, external_ref: 'x'.repeat(256 * 1024) })
    expectProblem(
      await prescribeRaw(big, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(big)) }),
      413,
      'payload_too_large',
    )
    expectProblem(await prescribeRaw(big, { 'content-type': 'application/json' }), 413, 'payload_too_large')
  })

  it('answers a body that is not JSON with 415, whether or not it declares its length', async () => {
    const form = new URLSearchParams({ patient_id: 'pt_1', cold_chain: 'false' }).toString()
    expectProblem(await prescribeRaw(form, { 'content-type': 'application/x-www-form-urlencoded' }), 415, 'unsupported_media_type')
    expectProblem(await prescribeRaw('{}', { 'content-type': 'text/plain', 'content-length': '2' }), 415, 'unsupported_media_type')
    expectProblem(await prescribeRaw('{}', {}), 415, 'unsupported_media_type')
  })

  it('has written nothing for any of the above', async () => {
    expect(await rowCounts()).toEqual(before)
  })

  it('gives the same answers over a real socket, and a kept-alive connection survives a refused body', async () => {
    ;({ httpPort } = await api.service.start())
    // One kept-alive connection: a request that follows a refusal reuses it at once.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    const send = (method: string, body: string | null, headers: Record<string, string>, chunked = false) =>
      new Promise<{ status: number; body: any; connection?: string }>((resolve, reject) => {
        const req = httpRequest(
          {
            agent,
            host: '127.0.0.1',
            port: httpPort,
            method,
            path: '/v1/prescriptions',
            headers: { authorization: `Bearer ${admin}`, 'idempotency-key': `sock-${Math.random()}`, ...headers },
          },
          (res) => {
            let text = ''
            res.on('data', (chunk) => (text += chunk))
            res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), connection: res.headers.connection }))
          },
        )
        req.on('error', reject)
        if (body === null) req.end()
        else if (chunked) {
          // No Content-Length: Node sends Transfer-Encoding: chunked.
          for (let i = 0; i < body.length; i += 64 * 1024) req.write(body.slice(i, i + 64 * 1024))
          req.end()
        } else {
          req.setHeader('content-length', Buffer.byteLength(body))
          req.end(body)
        }
      })
    const next = async () => expect((await send('GET', null, {})).status).toBe(200)
    try {
      const big = JSON.stringify({ pharmacy_id: pharmacyId, patient_id: 'pt_1', cold_chain: false, external_ref: 'x'.repeat(300 * 1024) })
      const declared = await send('POST', big, { 'content-type': 'application/json' })
      expect(declared.body.code).toBe('payload_too_large')
      expect(declared.connection).toBe('close') // the unread body must not be parsed as the next request
      await next()
      expect((await send('POST', big, { 'content-type': 'application/json' }, true)).body.code).toBe('payload_too_large')
      await next()
      expect((await send('POST', '{}', { 'content-type': 'text/plain' })).body.code).toBe('unsupported_media_type')
      await next()
      expect((await send('POST', '{}', { 'content-type': 'text/plain' }, true)).body.code).toBe('unsupported_media_type')
      await next()
      expect((await send('POST', '{"cold_chain":', { 'content-type': 'application/json' }, true)).body.code).toBe('invalid_json')
      await next()
    } finally {
      agent.destroy()
    }
    expect(await rowCounts()).toEqual(before)
  })

  it('audits a request whose client hangs up before its body arrives, and goes on serving', async () => {
    const requestId = `hangup-${Date.now()}`
    const socket = connect(httpPort, '127.0.0.1')
    await new Promise<void>((resolve) => socket.once('connect', resolve))
    socket.write(
      `POST /v1/prescriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${admin}\r\nIdempotency-Key: ${requestId}\r\n` +
        `X-Request-Id: ${requestId}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"patient_id":`,
    )
    setTimeout(() => socket.destroy(), 20)
    const audited = async () => {
      await api.service.audit.flush()
      return api.service.db.selectFrom('audit_events').select('status').where('request_id', '=', requestId).execute()
    }
    await expect.poll(audited, { timeout: 3_000 }).toEqual([{ status: 400 }])
    expect((await api.request('GET', `/v1/pharmacies/${pharmacyId}`, { token: admin })).status).toBe(200)
  })

  it("reads a JSON body that starts with a UTF-8 byte-order mark, as a browser's fetch would", async () => {
    const body = `\uFEFF${JSON.stringify({ pharmacy_id: pharmacyId, patient_id: 'pt_bom', cold_chain: false })}`
    const res = await prescribeRaw(body, { 'content-type': 'application/json' })
    expect(res.status, res.text).toBe(201)
  })
})
