import mqtt from 'mqtt'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'

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
  'webhook_endpoints',
  'oauth_clients',
] as const

/** `[` × depth, then `]` × depth: arrays nested `depth` levels deep. */
const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth)
/** A valid-looking prescription whose bytes hold a lone 0xFF, which is never UTF-8. */
const invalidUtf8 = (pharmacyId: string) =>
  Buffer.concat([
    Buffer.from(`{"pharmacy_id":"${pharmacyId}","patient_id":"pt_`),
    Buffer.from([0xff]),
    Buffer.from('","cold_chain":false}'),
  ])

describe('input that is refused, not rewritten', () => {
  let api: TestApi
  let admin: string
  let pharmacyId: string
  let deliveryId: string

  const send = async (method: string, path: string, body: string | Buffer, headers: Record<string, string> = {}) => {
    const res = await api.service.app.request(path, {
      method,
      body: typeof body === 'string' ? body : new Uint8Array(body),
      headers: {
        authorization: `Bearer ${admin}`,
        'content-type': 'application/json',
        'idempotency-key': `refused-${Math.random()}`,
        ...headers,
      },
    })
    const text = await res.text()
    return {
      status: res.status,
      type: res.headers.get('content-type'),
      body: JSON.parse(text) as { code: string; detail: string; errors?: { pointer: string; message: string }[] },
    }
  }
  const rowCounts = async () => {
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

  /** Each body, posted as a prescription, is answered 422 with one error at its pointer whose message matches `message`. */
  const expectRefusedPrescriptions = async (cases: [body: string, pointer: string][], message: RegExp) => {
    for (const [body, pointer] of cases) {
      const res = await send('POST', '/v1/prescriptions', body)
      expect(res.status, body).toBe(422)
      expect(res.body.code).toBe('validation_failed')
      expect(res.body.errors).toEqual([{ pointer, message: expect.stringMatching(message) }])
    }
  }

  /** Every route that takes a JSON body, from the OpenAPI document, with real ids where it needs one. */
  async function jsonBodyRoutes(): Promise<{ method: string; path: string }[]> {
    const doc = (await api.get('/v1/openapi.json', admin)).body as {
      paths: Record<string, Record<string, { requestBody?: { content?: Record<string, unknown> } }>>
    }
    const routes: { method: string; path: string }[] = []
    for (const [template, operations] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        if (!operation.requestBody?.content?.['application/json']) continue
        const id = template.startsWith('/v1/deliveries')
          ? deliveryId
          : template.startsWith('/v1/pharmacies')
            ? pharmacyId
            : 'xx_01jd0000000000000000000000'
        routes.push({ method: method.toUpperCase(), path: template.replace(/\{[^}]+\}/, id) })
      }
    }
    return routes
  }

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    deliveryId = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
  })
  afterAll(() => api.stop())

  it('answers a body that is not UTF-8 with 400 invalid_json instead of storing U+FFFD', async () => {
    const before = await rowCounts()
    const res = await send('POST', '/v1/prescriptions', invalidUtf8(pharmacyId))
    expect(res.status).toBe(400)
    expect(res.type).toBe('application/problem+json')
    expect(res.body.code).toBe('invalid_json')
    expect(res.body.detail).toMatch(/UTF-8/)
    expect(await rowCounts()).toEqual(before)
  })

  it('answers a document nested deeper than 32 levels with 400 invalid_json, and takes 32', async () => {
    const member = (depth: number) =>
      `{"pharmacy_id":"${pharmacyId}","patient_id":"pt_1","cold_chain":false,"external_ref":${nested(depth)}}`
    const deep = await send('POST', '/v1/prescriptions', member(32))
    expect(deep.status).toBe(400)
    expect(deep.body).toMatchObject({ code: 'invalid_json', detail: expect.stringMatching(/deeper than 32/) })
    // 31 levels inside the top-level object: 32 in all, so the member's type is what is wrong.
    const deepest = await send('POST', '/v1/prescriptions', member(31))
    expect(deepest.status).toBe(422)
    expect(deepest.body.errors).toEqual([expect.objectContaining({ pointer: '/external_ref' })])
    // Brackets inside strings are not nesting.
    const inString = await send(
      'POST',
      '/v1/prescriptions',
      `{"pharmacy_id":"${pharmacyId}","patient_id":"pt_1","cold_chain":false,"external_ref":"${'[\\"'.repeat(40)}"}`,
    )
    expect(inString.status).toBe(201)
    const bomb = await send('POST', '/v1/prescriptions', nested(100_000))
    expect(bomb.status).toBe(400)
    expect(bomb.body.code).toBe('invalid_json')
  })

  it('answers __proto__, constructor and prototype members anywhere with 422 and a pointer to them', async () => {
    const before = await rowCounts()
    const base = `"pharmacy_id":"${pharmacyId}","patient_id":"pt_1","cold_chain":false`
    const cases: [string, string][] = [
      [`{${base},"__proto__":{"admin":true}}`, '/__proto__'],
      [`{${base},"items":[{"description":"Insulin","quantity":1,"constructor":{"prototype":{}}}]}`, '/items/0/constructor'],
      // A JSON escape spells the same name.
      [`{${base},"\\u005f_proto__":{}}`, '/__proto__'],
      [`{${base},"external_ref":{"a/b":{"prototype":1}}}`, '/external_ref/a~1b/prototype'],
    ]
    await expectRefusedPrescriptions(cases, /reserved/)
    expect(await rowCounts()).toEqual(before)
  })

  it('answers a string escaping half of a surrogate pair with 422 and a pointer, instead of storing U+FFFD', async () => {
    const before = await rowCounts()
    const base = `"pharmacy_id":"${pharmacyId}","cold_chain":false`
    const cases: [string, string][] = [
      [`{${base},"patient_id":"pt_\\ud800"}`, '/patient_id'],
      [`{${base},"patient_id":"pt_1","metadata":{"note":"x\\uDC00y"}}`, '/metadata/note'],
      // A pair written the wrong way round is two lone halves.
      [`{${base},"patient_id":"pt_1","items":[{"description":"\\udc8a\\ud83d","quantity":1}]}`, '/items/0/description'],
      // A member name is pointed at through its object: the answer does not echo it.
      [`{${base},"patient_id":"pt_1","metadata":{"\\ud83d":"x"}}`, '/metadata'],
    ]
    await expectRefusedPrescriptions(cases, /surrogate/)
    expect(await rowCounts()).toEqual(before)
    // A whole pair, escaped or not, and an escaped backslash before "ud800" are text, kept as sent.
    const pill = '\u{1F48A}'
    const kept = await send('POST', '/v1/prescriptions', `{${base},"patient_id":"pt_\\ud83d\\udc8a${pill}","external_ref":"\\\\ud800"}`)
    expect(kept.status).toBe(201)
    const rx = (await api.get(`/v1/prescriptions/${(kept.body as unknown as { rx_id: string }).rx_id}`, admin)).body
    expect([rx.patient_id, rx.external_ref]).toEqual([`pt_${pill}${pill}`, '\\ud800'])
  })

  it('refuses the same on every route that takes a JSON body, before the route sees it', async () => {
    const routes = await jsonBodyRoutes()
    expect(routes.length).toBeGreaterThan(10)
    const before = await rowCounts()
    for (const { method, path } of routes) {
      const where = `${method} ${path}`
      const utf8 = await send(method, path, Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x3a, 0x31, 0x7d])) // {"\xC3(":1}
      expect([utf8.status, utf8.body.code], where).toEqual([400, 'invalid_json'])
      const deep = await send(method, path, nested(33))
      expect([deep.status, deep.body.code], where).toEqual([400, 'invalid_json'])
      const proto = await send(method, path, '{"__proto__":{"polluted":true}}')
      expect([proto.status, proto.body.errors], where).toEqual([422, [expect.objectContaining({ pointer: '/__proto__' })]])
      const lone = await send(method, path, '{"name":"\\ud800"}')
      expect([lone.status, lone.body.errors], where).toEqual([422, [expect.objectContaining({ pointer: '/name' })]])
    }
    expect(await rowCounts()).toEqual(before)
    expect(({} as Record<string, unknown>).polluted).toBeUndefined()
  })

  it('refuses a query parameter that is not UTF-8 or has a reserved name, instead of ignoring it', async () => {
    const proto = await api.get('/v1/deliveries?__proto__=1', admin)
    expect(proto.status).toBe(422)
    expect(proto.body.errors).toEqual([{ pointer: '/query/__proto__', message: expect.stringMatching(/reserved/) }])
    const constructor = await api.get('/v1/pharmacies?limit=5&constructor', admin)
    expect(constructor.status).toBe(422)
    expect(constructor.body.errors).toEqual([expect.objectContaining({ pointer: '/query/constructor' })])
    const badValue = await api.get('/v1/deliveries?status=QUEUED%FF', admin)
    expect(badValue.status).toBe(422)
    expect(badValue.body.errors).toEqual([{ pointer: '/query/status', message: expect.stringMatching(/UTF-8/) }])
    const badName = await api.get('/v1/deliveries?%C3%28=1', admin)
    expect(badName.status).toBe(422)
    // What is still fine: encoded UTF-8, `+` for a space, a bare name.
    expect((await api.get('/v1/deliveries?status=QUEUED&limit=%35', admin)).status).toBe(200)
  })
})

describe('a tote payload that is refused, not rewritten', () => {
  let api: TestApi
  let mqttPort: number
  beforeAll(async () => {
    api = await startTestService()
    mqttPort = (await api.service.start()).mqttPort
  })
  afterAll(() => api.stop())

  it("answers invalid UTF-8, deep nesting, reserved member names, lone surrogates and NUL on the tote's errors topic, storing nothing", async () => {
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: tote.mqtt.username,
      password: tote.mqtt.password,
      clientId: tote.id,
      reconnectPeriod: 0,
    })
    const errors: { error: string; reason: string }[] = []
    client.on('message', (_topic, payload) => errors.push(JSON.parse(payload.toString())))
    await client.subscribeAsync(`rxtrace/v1/totes/${tote.id}/errors`, { qos: 1 })
    const before = await api.service.sink.count()
    const topic = `rxtrace/v1/totes/${tote.id}/readings`
    const reading = `{"ts":${Date.now()},"temp_c":4.5`
    // The 0xFF sits in a member the parser would otherwise ignore: U+FFFD would pass unseen.
    await client.publishAsync(topic, Buffer.concat([Buffer.from(`${reading},"note":"`), Buffer.from([0xff]), Buffer.from('"}')]), {
      qos: 1,
    })
    await client.publishAsync(topic, `${reading},"gateway":${nested(40)}}`, { qos: 1 })
    await client.publishAsync(topic, `[${reading}},${reading},"__proto__":{"temp_c":1}}]`, { qos: 1 })
    await client.publishAsync(topic, `${reading},"note":"\\udfff"}`, { qos: 1 })
    await client.publishAsync(topic, `${reading},"gateway":{"id":"g\\u0000"}}`, { qos: 1 })
    await waitFor(() => errors.length === 5)
    expect(errors).toEqual([
      expect.objectContaining({ error: 'invalid_json', reason: expect.stringMatching(/UTF-8/) }),
      expect.objectContaining({ error: 'invalid_json', reason: expect.stringMatching(/deeper than 32/) }),
      expect.objectContaining({ error: 'invalid_json', reason: expect.stringMatching(/\/1\/__proto__/) }),
      expect.objectContaining({ error: 'invalid_json', reason: expect.stringMatching(/\/note: .*surrogate/) }),
      expect.objectContaining({ error: 'invalid_json', reason: expect.stringMatching(/\/gateway\/id: .*U\+0000/) }),
    ])
    expect(await api.service.sink.count()).toBe(before)
    await client.endAsync()
  })
})
