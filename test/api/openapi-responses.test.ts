import { createHash, randomBytes } from 'node:crypto'
import { readFileSync, writeFileSync } from 'node:fs'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { eventTypes } from '../../src/events/fanout.js'
import { responseValidator, type OpenApiDocument } from '../helpers/openapi-responses.js'
import { ADMIN, startTestService, type TestApi } from '../helpers/service.js'
import { signedInPerson } from '../helpers/users.js'
import { feed } from '../trace/cold-chain-delivery.js'

/**
 * Real requests through the whole API, over a socket, each answer validated against the schema the
 * OpenAPI document gives for its status and media type; every answer carries `API-Version: v1`.
 * Every operation must be seen succeeding, and every /v1 operation answering 401, 403 and (when
 * it takes an id or a body) 404 and 422; the answers of the middleware and the error handler
 * (405, 413, 415, 429, 500, 503) are checked too, and every event type the service emits is
 * raised once. `UPDATE_OPENAPI_EXAMPLES=1` records the first success of each operation (and one
 * event of each webhook type) as the document's examples.
 */
const EXAMPLES_FILE = new URL('../../src/api/openapi-examples.json', import.meta.url)
const UPDATE = process.env.UPDATE_OPENAPI_EXAMPLES === '1'

type Call = {
  stream?: boolean
  token?: string
  json?: unknown
  raw?: string | Uint8Array
  contentType?: string
  form?: Record<string, string>
  headers?: Record<string, string>
  basic?: [string, string]
  base?: string
}
type Answer = { status: number; headers: Headers; text: string; body: any }

describe('every answer of the API validates against the OpenAPI document', () => {
  let api: TestApi
  let base: string
  let doc: OpenApiDocument
  let validator: ReturnType<typeof responseValidator>
  const problems: string[] = []
  const seen = new Map<string, Set<number>>()
  const recorded: { operations: Record<string, unknown>; webhooks: Record<string, unknown> } = { operations: {}, webhooks: {} }
  const requests = new Map<string, unknown>() // operationId → the body of its first success
  const rawRequests = new Map<string, { raw: string; contentType: string }>() // … when it was not JSON or a form
  const queries = new Map<string, string>() // operationId → the query string of its first success
  let admin: string
  const world: Record<string, string> = {}

  /** `expected` null: any status (a loop that waits for one); the answer is still checked against the document. */
  async function call(method: string, path: string, expected: number | null, opts: Call = {}): Promise<Answer> {
    const headers: Record<string, string> = { ...opts.headers }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`
    if (opts.basic) headers.authorization = `Basic ${Buffer.from(opts.basic.join(':')).toString('base64')}`
    let body: string | Uint8Array | undefined = opts.raw
    if (opts.json !== undefined) body = JSON.stringify(opts.json)
    if (opts.form) body = new URLSearchParams(opts.form).toString()
    if (body !== undefined)
      headers['content-type'] ??= opts.contentType ?? (opts.form ? 'application/x-www-form-urlencoded' : 'application/json')
    const stop = new AbortController()
    const res = await fetch((opts.base ?? base) + path, {
      method,
      headers,
      body: body as BodyInit | undefined,
      redirect: 'manual',
      signal: stop.signal,
    })
    // A stream never ends: its first chunk (`retry:` and what follows) is what is checked.
    const text =
      opts.stream && res.headers.get('content-type')?.startsWith('text/event-stream')
        ? new TextDecoder().decode((await res.body!.getReader().read()).value)
        : await res.text()
    stop.abort()
    expect(res.headers.get('api-version'), `${method} ${path}: API-Version`).toBe('v1')
    const { operationId, problems: found } = validator.check(method, path, res.status, res.headers.get('content-type'), text)
    problems.push(...found)
    if (expected !== null) expect(res.status, `${method} ${path}: ${text.slice(0, 500)}`).toBe(expected)
    if (operationId) {
      if (!seen.has(operationId)) seen.set(operationId, new Set())
      seen.get(operationId)!.add(res.status)
      if (res.status < 400 && !recorded.operations[operationId]) {
        const media = (res.headers.get('content-type') ?? '').split(';')[0]!
        // An image (a proof-of-delivery download) is named, not shown: its bytes are no text.
        const example = /json/.test(media)
          ? JSON.parse(text)
          : media.startsWith('image/')
            ? `(the ${media} image's bytes)`
            : text.length > 300
              ? `${text.slice(0, 300)}…`
              : text
        const request = opts.json ?? opts.form
        if (request !== undefined) requests.set(operationId, request)
        if (typeof opts.raw === 'string' && opts.contentType) rawRequests.set(operationId, { raw: opts.raw, contentType: opts.contentType })
        if (path.includes('?')) queries.set(operationId, path.slice(path.indexOf('?') + 1))
        recorded.operations[operationId] = {
          ...(request !== undefined ? { request } : {}),
          response: { status: String(res.status), contentType: media, ...(text ? { body: example } : {}) },
        }
      }
    }
    let parsed: unknown = text
    try {
      parsed = JSON.parse(text)
    } catch {
      /* not JSON */
    }
    return { status: res.status, headers: res.headers, text, body: parsed }
  }

  // The service's clock runs with the wall clock, `shift` ms away from it: a delivery created an hour
  // ago can be dispatched 50 minutes ago, and its tote's readings of the last hour evaluated.
  let shift = 0
  const clock = { now: () => Date.now() + shift }
  let pharmacyDesk: Server // a pharmacy's writeback receiver: acknowledges everything

  beforeAll(async () => {
    pharmacyDesk = createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()))
    await new Promise<void>((resolve) => pharmacyDesk.listen(0, '127.0.0.1', resolve))
    // Writebacks that cannot be delivered give up within a second.
    api = await startTestService({ PASSWORD_SCRYPT_LOG2_N: '10', WEBHOOK_RETRY_SCHEDULE: '50ms,50ms' }, { clock })
    const { httpPort } = await api.service.start()
    base = `http://127.0.0.1:${httpPort}`
    doc = (await (await fetch(`${base}/v1/openapi.json`)).json()) as OpenApiDocument
    validator = responseValidator(doc)
  })
  afterAll(async () => {
    await api?.stop()
    pharmacyDesk?.close()
  })

  it('OAuth: discovery, keys, tokens, revocation and introspection', async () => {
    await call('GET', '/.well-known/oauth-authorization-server', 200)
    await call('GET', '/.well-known/jwks.json', 200)
    await call('GET', '/.well-known/rxtrace.json', 200)
    const token = await call('POST', '/oauth/token', 200, { form: { grant_type: 'client_credentials' }, basic: [ADMIN.id, ADMIN.secret] })
    admin = token.body.access_token
    await call('POST', '/oauth/token', 401, { form: { grant_type: 'client_credentials' }, basic: [ADMIN.id, 'wrong-secret'] })
    await call('POST', '/oauth/token', 400, { form: { grant_type: 'password' }, basic: [ADMIN.id, ADMIN.secret] })
    await call('POST', '/oauth/introspect', 200, { form: { token: admin }, basic: [ADMIN.id, ADMIN.secret] })
    await call('POST', '/oauth/introspect', 401, { form: { token: admin } })
    const spare = (await call('POST', '/oauth/token', 200, { form: { grant_type: 'client_credentials' }, basic: [ADMIN.id, ADMIN.secret] }))
      .body.access_token
    await call('POST', '/oauth/revoke', 200, { form: { token: spare }, basic: [ADMIN.id, ADMIN.secret] })
    await call('POST', '/oauth/revoke', 401, { form: { token: spare } })
  })

  it('pharmacies, fleets, drivers, totes, users and clients', async () => {
    world.pharmacy = (
      await call('POST', '/v1/pharmacies', 201, {
        token: admin,
        json: {
          name: 'Main Street Pharmacy',
          ncpdp_id: '1234567',
          address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
          timezone: 'America/Chicago',
          location: { lat: 39.7817, lng: -89.6501 },
          phone: '+12175550142',
          patient_notify: true,
        },
      })
    ).body.id
    await call('GET', `/v1/pharmacies/${world.pharmacy}`, 200, { token: admin })
    // An alarm nobody acknowledges within a second is escalated (the excursion below raises one).
    await call('PATCH', `/v1/pharmacies/${world.pharmacy}`, 200, { token: admin, json: { escalate_after_s: 1 } })
    await call('GET', '/v1/pharmacies?limit=10', 200, { token: admin })
    world.fleet = (
      await call('POST', '/v1/fleets', 201, {
        token: admin,
        json: {
          name: 'Speedy Couriers',
          branding: { display_name: 'Speedy', logo_url: 'https://speedy.example/logo.png', primary_color: '#0a7d5a' },
        },
      })
    ).body.id
    await call('GET', `/v1/fleets/${world.fleet}`, 200, { token: admin })
    await call('GET', '/v1/fleets', 200, { token: admin })
    world.driver = (
      await call('POST', `/v1/fleets/${world.fleet}/drivers`, 201, { token: admin, json: { name: 'Dana Driver', phone: '+15551234567' } })
    ).body.id
    world.driver2 = (await call('POST', `/v1/fleets/${world.fleet}/drivers`, 201, { token: admin, json: { name: 'Sam Second' } })).body.id
    await call('GET', `/v1/fleets/${world.fleet}/drivers`, 200, { token: admin })
    world.tote = (
      await call('POST', '/v1/totes', 201, { token: admin, json: { serial: 'TOTE-0001', pharmacy_id: world.pharmacy } })
    ).body.id
    world.tote2 = (
      await call('POST', '/v1/totes', 201, { token: admin, json: { serial: 'TOTE-0002', pharmacy_id: world.pharmacy } })
    ).body.id
    await call('PATCH', `/v1/totes/${world.tote}`, 200, {
      token: admin,
      json: {
        sensor: {
          serial: 'TS-4471',
          model: 'ColdProbe 3',
          accuracy_c: 0.3,
          calibrated_at: '2026-01-15T09:00:00Z',
          calibration_due: '2099-01-15T09:00:00Z',
          certificate_ref: 'DAkkS D-K-15070-01-00/2026-118',
        },
      },
    })
    await call('GET', `/v1/totes/${world.tote}`, 200, { token: admin })
    await call('GET', '/v1/totes', 200, { token: admin })
    await call('GET', `/v1/totes/${world.tote}/readings`, 200, { token: admin })

    world.user = (
      await call('POST', '/v1/users', 201, {
        token: admin,
        json: {
          email: 'pat@example.com',
          name: 'Pat Pharmacist',
          role: 'pharmacist',
          pharmacy_id: world.pharmacy,
          password: 'correct horse battery staple',
        },
      })
    ).body.id
    await call('POST', '/v1/users', 409, {
      token: admin,
      json: {
        email: 'pat@example.com',
        name: 'Pat Again',
        role: 'pharmacist',
        pharmacy_id: world.pharmacy,
        password: 'correct horse battery staple',
      },
    })
    await call('GET', '/v1/users', 200, { token: admin })
    await call('GET', `/v1/users/${world.user}`, 200, { token: admin })
    await call('PATCH', `/v1/users/${world.user}`, 200, { token: admin, json: { name: 'Pat P. Pharmacist' } })

    const client = await call('POST', '/v1/oauth/clients', 201, {
      token: admin,
      json: {
        client_name: 'Pharmacy back office',
        scope: 'pharmacies:read prescriptions:read prescriptions:write deliveries:read',
        pharmacy_id: world.pharmacy,
      },
    })
    world.client = client.body.client_id
    await call('GET', `/v1/oauth/clients/${world.client}`, 200, { token: admin })
    await call('POST', `/v1/oauth/clients/${world.client}/rotate-secret`, 200, { token: admin, json: { overlap_s: 3600 } })
    await call('POST', '/v1/oauth/signing-keys/rotate', 200, { token: admin, json: { publish_ahead_s: 0 } })
    const console = await call('POST', '/v1/oauth/clients', 201, {
      token: admin,
      json: {
        client_name: 'Console',
        token_endpoint_auth_method: 'none',
        redirect_uris: ['https://console.example/callback'],
        first_party: true,
        scope: 'deliveries:read',
      },
    })
    world.publicClient = console.body.client_id
  })

  it('sign-in pages: authorize, the sign-in form and logout', async () => {
    const verifier = randomBytes(32).toString('base64url')
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: world.publicClient!,
      redirect_uri: 'https://console.example/callback',
      state: 'st-1',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    })
    const page = await call('GET', `/oauth/authorize?${query}`, 200)
    await call('GET', '/oauth/authorize?client_id=cl_nobody', 400)
    const cookie = page.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ')
    const hidden = Object.fromEntries(
      [...page.text.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)].map((m) => [m[1]!, m[2]!.replace(/&amp;/g, '&')]),
    )
    await call('POST', '/oauth/authorize', 401, {
      form: { ...hidden, email: 'pat@example.com', password: 'not the password at all' },
      headers: { cookie },
    })
    const done = await call('POST', '/oauth/authorize', 303, {
      form: { ...hidden, email: 'pat@example.com', password: 'correct horse battery staple' },
      headers: { cookie },
    })
    const session = done.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ')
    await call('POST', '/oauth/logout', 200, { form: {}, headers: { cookie: session } })
  })

  it('the delivery lifecycle: create, dispatch, pick up, hand off, deliver, fail, return, cancel, disposition', async () => {
    const rx = (body: object, key: string) =>
      call('POST', '/v1/prescriptions', 201, { token: admin, json: body, headers: { 'idempotency-key': key } })
    const first = await rx(
      {
        patient_id: 'pt_123',
        cold_chain: true,
        pharmacy_id: world.pharmacy,
        temperature_profile: 'refrigerated',
        deliver_by: '2030-01-01T17:00:00Z',
        items: [{ description: 'Insulin glargine 100 U/mL pen', ndc: '0088-2220-33', quantity: 5 }],
        external_ref: 'ORDER-1001',
        metadata: { ward: '4B' },
      },
      'rx-1',
    )
    await call('POST', '/v1/prescriptions', 400, { token: admin, json: { patient_id: 'pt_1', cold_chain: false } })
    await call('POST', '/v1/prescriptions', 422, { token: admin, json: { patient_id: 'pt_1' }, headers: { 'idempotency-key': 'rx-bad' } })
    await call('GET', `/v1/prescriptions/${first.body.rx_id}`, 200, { token: admin })
    await call('GET', '/v1/prescriptions', 200, { token: admin })
    const dl = first.body.delivery_id as string
    await call('POST', `/v1/deliveries/${dl}/deliver`, 409, { token: admin, json: { verification: { method: 'otp', evidence: '123456' } } })
    await call('POST', `/v1/deliveries/${dl}/dispatch`, 200, {
      token: admin,
      json: { fleet_id: world.fleet, driver_id: world.driver, tote_id: world.tote },
    })
    const signature =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
    await call('POST', `/v1/deliveries/${dl}/pickup`, 200, { token: admin, json: { from: world.pharmacy, to: world.driver, signature } })
    await call('POST', `/v1/deliveries/${dl}/handoff`, 200, {
      token: admin,
      json: { from: world.driver, to: world.driver2, signature, location: { lat: 39.79, lng: -89.64 } },
    })
    const now = Date.now()
    await feed(api, world.tote!, [
      { ts: now, temp_c: 5 },
      { ts: now + 1_000, temp_c: 5.2 },
    ])
    await call('GET', `/v1/deliveries/${dl}/temperature?step=60s`, 200, { token: admin })
    await call('GET', `/v1/deliveries/${dl}/temperature.svg`, 200, { token: admin })
    await call('POST', `/v1/deliveries/${dl}/deliver`, 200, { token: admin, json: { verification: { method: 'otp', evidence: '123456' } } })
    await call('GET', `/v1/deliveries/${dl}`, 200, { token: admin })
    await call('GET', `/v1/deliveries?status=DELIVERED&pharmacy_id=${world.pharmacy}`, 200, { token: admin })
    await call('GET', `/v1/deliveries/${dl}/custody/verify`, 200, { token: admin })
    await call('GET', `/v1/deliveries/${dl}/parties`, 200, { token: admin })
    await call('GET', `/v1/deliveries/${dl}/epcis`, 200, { token: admin })
    await call('GET', '/v1/epcis/events?limit=2', 200, { token: admin })

    const second = (await rx({ patient_id: 'pt_456', cold_chain: false, pharmacy_id: world.pharmacy }, 'rx-2')).body.delivery_id
    await call('POST', `/v1/deliveries/${second}/dispatch`, 200, { token: admin, json: { fleet_id: world.fleet, driver_id: world.driver } })
    await call('POST', `/v1/deliveries/${second}/pickup`, 200, {
      token: admin,
      json: { from: world.pharmacy, to: world.driver, signature },
    })
    await call('POST', `/v1/deliveries/${second}/fail`, 200, { token: admin, json: { reason: 'patient_unavailable', note: 'Nobody home' } })
    await call('POST', `/v1/deliveries/${second}/reattempt`, 200, { token: admin, json: {} })
    await call('POST', `/v1/deliveries/${second}/pickup`, 200, { token: admin, json: { from: world.driver, to: world.driver, signature } })
    await call('POST', `/v1/deliveries/${second}/fail`, 200, {
      token: admin,
      json: { reason: 'refused', note: 'Patient refused the package' },
    })
    await call('POST', `/v1/deliveries/${second}/return`, 200, {
      token: admin,
      json: { from: world.driver, to: world.pharmacy, signature },
    })
    const link = await call('POST', `/v1/deliveries/${second}/tracking-links`, 201, { token: admin })
    await call('GET', `/track${new URL(link.body.url).search}`, 200)
    await call('GET', '/track?token=not-a-token', 404)
    const third = (await rx({ patient_id: 'pt_789', cold_chain: false, pharmacy_id: world.pharmacy }, 'rx-3')).body.delivery_id
    await call('POST', `/v1/deliveries/${third}/cancel`, 200, { token: admin, json: { reason: 'Patient picked it up in store' } })

    // A frozen insulin pen: below the refrigerated profile's hard minimum, the chain breaks at once.
    const fourth = (await rx({ patient_id: 'pt_999', cold_chain: true, pharmacy_id: world.pharmacy }, 'rx-4')).body.delivery_id
    await call('POST', `/v1/deliveries/${fourth}/dispatch`, 200, {
      token: admin,
      json: { fleet_id: world.fleet, driver_id: world.driver, tote_id: world.tote2 },
    })
    const at = Date.now()
    await feed(api, world.tote2!, [
      { ts: at, temp_c: -4 },
      { ts: at + 1_000, temp_c: -4.5 },
    ])
    const broken = await call('GET', `/v1/deliveries/${fourth}`, 200, { token: admin })
    expect(broken.body.cold_chain.state).toBe('BROKEN')
    await call('POST', `/v1/deliveries/${fourth}/deliver`, 409, { token: admin, json: { verification: { method: 'otp', evidence: '1' } } })
    await call('GET', '/v1/deliveries?order=attention&cold_chain_state=BROKEN', 200, { token: admin })
    // A disposition is signed by a person (docs/part11.md): a pharmacist of the pharmacy, with the password.
    const pharmacist = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: world.pharmacy! })
    const decision = { decision: 'return', note: 'Froze in transit; destroy and re-dispense' }
    await call('POST', `/v1/deliveries/${fourth}/disposition`, 403, {
      token: admin,
      json: { ...decision, signature: { meaning: 'returned', password: 'a machine has none' } },
    })
    await call('POST', `/v1/deliveries/${fourth}/disposition`, 401, {
      token: pharmacist.token,
      json: { ...decision, signature: { meaning: 'returned', password: 'not the password' } },
    })
    await call('POST', `/v1/deliveries/${fourth}/disposition`, 200, {
      token: pharmacist.token,
      json: { ...decision, signature: { meaning: 'returned', password: pharmacist.password } },
    })
    world.broken = fourth
  })

  it("live location and ETA: a driver's positions, the router's ETA, eta-changed and arriving", async () => {
    const door = { line1: '1 Patient Way', city: 'Springfield', lat: 39.7817, lng: -89.6501 }
    const rx = await call('POST', '/v1/prescriptions', 201, {
      token: admin,
      json: { patient_id: 'pt_900', cold_chain: false, pharmacy_id: world.pharmacy, delivery_address: door },
      headers: { 'idempotency-key': 'rx-positions' },
    })
    const dl = rx.body.delivery_id as string
    await call('POST', `/v1/deliveries/${dl}/dispatch`, 200, { token: admin, json: { fleet_id: world.fleet, driver_id: world.driver2 } })
    const signature = 'data:image/png;base64,iVBORw0KGgo='
    await call('POST', `/v1/deliveries/${dl}/pickup`, 200, { token: admin, json: { from: world.pharmacy, to: world.driver2, signature } })
    const at = (ms = 0) => new Date(Date.now() + ms).toISOString()
    // 9 km north of the door, then 300 m: the ETA moves (eta-changed) and the driver is arriving.
    await call('POST', `/v1/drivers/${world.driver2}/locations`, 200, {
      token: admin,
      json: { positions: [{ lat: 39.8626, lng: -89.6501, accuracy_m: 8, at: at(-1_000) }] },
    })
    await call('POST', `/v1/drivers/${world.driver2}/locations`, 200, {
      token: admin,
      json: { positions: [{ lat: 39.7844, lng: -89.6501, accuracy_m: 5, at: at() }] },
    })
    await call('PUT', `/v1/deliveries/${dl}/eta`, 200, { token: admin, json: { eta: at(4 * 60_000) } })
    await call('GET', `/v1/deliveries/${dl}/locations?limit=10`, 200, { token: admin })
  })

  it('fleet money: rate cards, reconciliation, the statement check, the dashboard and the embedded page', async () => {
    const f = `/v1/fleets/${world.fleet}`
    await call('PATCH', f, 200, { token: admin, json: { embed_origins: ['https://dispatch.speedy.example'] } })
    await call('GET', `${f}/rate-card`, 404, { token: admin })
    await call('PUT', `${f}/rate-card`, 201, {
      token: admin,
      json: {
        currency: 'USD',
        base_fee_cents: 650,
        per_km_cents: 85,
        cold_chain_surcharge_cents: 300,
        failed_attempt_fee_cents: 400,
        after_hours_multiplier: 1.5,
        commission_bps: 1200,
      },
    })
    await call('PUT', `${f}/rate-card`, 422, {
      token: admin,
      json: {
        currency: 'usd',
        base_fee_cents: -1,
        per_km_cents: 85,
        cold_chain_surcharge_cents: 300,
        failed_attempt_fee_cents: 400,
        after_hours_multiplier: 1.5,
        commission_bps: 1200,
      },
    })
    await call('GET', `${f}/rate-card`, 200, { token: admin })
    await call('GET', `${f}/rate-card/versions?limit=10`, 200, { token: admin })
    // Priced at dispatch: a delivery dispatched under version 1 and delivered gives a line.
    const rx = await call('POST', '/v1/prescriptions', 201, {
      token: admin,
      json: { patient_id: 'pt_321', cold_chain: false, pharmacy_id: world.pharmacy },
      headers: { 'idempotency-key': 'rx-money' },
    })
    const dl = rx.body.delivery_id as string
    await call('POST', `/v1/deliveries/${dl}/dispatch`, 200, { token: admin, json: { fleet_id: world.fleet, driver_id: world.driver } })
    const signature =
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
    await call('POST', `/v1/deliveries/${dl}/pickup`, 200, { token: admin, json: { from: world.pharmacy, to: world.driver, signature } })
    // A photo of the handover (docs/api.md, Proof of delivery): uploaded, uploaded again (the same attachment), read back.
    const png = Buffer.from(signature.split(',')[1]!, 'base64')
    const photo = await call('POST', `/v1/deliveries/${dl}/attachments`, 201, { token: admin, raw: png, contentType: 'image/png' })
    await call('POST', `/v1/deliveries/${dl}/attachments`, 200, { token: admin, raw: png, contentType: 'image/png' })
    await call('GET', `/v1/deliveries/${dl}/attachments/${photo.body.id}`, 200, { token: admin })
    await call('POST', `/v1/deliveries/${dl}/attachments`, 413, {
      token: admin,
      raw: new Uint8Array(5 * 1024 * 1024 + 1),
      contentType: 'image/png',
    })
    await call('POST', `/v1/deliveries/${dl}/deliver`, 200, {
      token: admin,
      json: { verification: { method: 'otp', evidence: '123456' }, location: { lat: 39.8, lng: -89.6 }, proof: { photo: photo.body.id } },
    })
    await call('POST', `/v1/deliveries/${dl}/attachments`, 409, { token: admin, raw: png, contentType: 'image/png' })
    const period = `from=${encodeURIComponent(new Date(Date.now() - 86_400_000).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + 86_400_000).toISOString())}`
    const recon = await call('GET', `${f}/reconciliation?${period}`, 200, { token: admin })
    expect(recon.body.lines.map((l: { delivery_id: string }) => l.delivery_id)).toContain(dl)
    await call('GET', `${f}/reconciliation?${period}`, 200, { token: admin, headers: { accept: 'text/csv' } })
    await call('GET', `${f}/reconciliation?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z`, 422, { token: admin })
    const ours = recon.body.lines.find((l: { delivery_id: string }) => l.delivery_id === dl).payout_cents as number
    await call('POST', `${f}/reconciliation?${period}`, 200, {
      token: admin,
      raw: `${JSON.stringify({ delivery_id: dl, payout_cents: ours + 1 })}\n`,
      contentType: 'application/x-ndjson',
    })
    await call('POST', `${f}/reconciliation?${period}`, 200, {
      token: admin,
      raw: `delivery_id,payout_cents\r\n${dl},${ours}\r\n`,
      contentType: 'text/csv',
    })
    await call('POST', `${f}/reconciliation?${period}`, 422, {
      token: admin,
      raw: 'not json\n{"payout_cents":1}\n',
      contentType: 'application/x-ndjson',
    })
    await call('GET', `${f}/dashboard`, 200, { token: admin })
    const session = await call('POST', `${f}/embed-sessions`, 201, { token: admin, json: { ttl_s: 120 } })
    await call('POST', `${f}/embed-sessions`, 422, { token: admin, json: { ttl_s: 6000 } })
    const page = new URL(session.body.url)
    await call('GET', `/embed/dashboard${page.search}`, 200)
    await call('GET', `/embed/dashboard/data${page.search}`, 200)
    await call('GET', '/embed/dashboard?token=not-a-token', 401)
    await call('GET', '/embed/dashboard/data?token=not-a-token', 401)
    await call('GET', `${f}/dashboard`, 401, { token: page.searchParams.get('token')! }) // an embed token is not an access token
  })

  it('raises every other event: an excursion and its recovery, a sensor gap, writebacks that succeed and fail', async () => {
    const signature = 'signed at the counter'
    // A refrigerated delivery created an hour ago, dispatched 50 minutes ago with its tote.
    const tote = (await call('POST', '/v1/totes', 201, { token: admin, json: { serial: 'TOTE-0003', pharmacy_id: world.pharmacy } })).body
      .id
    shift = -3_600_000
    const earlier = (
      await call('POST', '/oauth/token', 200, { form: { grant_type: 'client_credentials' }, basic: [ADMIN.id, ADMIN.secret] })
    ).body.access_token
    const rx = await call('POST', '/v1/prescriptions', 201, {
      token: earlier,
      json: { patient_id: 'pt_cold', cold_chain: true, pharmacy_id: world.pharmacy, temperature_profile: 'refrigerated' },
      headers: { 'idempotency-key': 'rx-cold' },
    })
    // Dispatched with the clock 50 minutes back; the clock returns to now only as the readings are
    // handed over, so the once-a-second silence check cannot judge 50 minutes without them first.
    shift = -3_000_000
    const dispatchedAt = Date.now() + shift
    await call('POST', `/v1/deliveries/${rx.body.delivery_id}/dispatch`, 200, {
      token: earlier,
      json: { fleet_id: world.fleet, driver_id: world.driver, tote_id: tote },
    })
    // Refrigerated: 2–8 °C, 300 s of grace, 900 s without a reading is a sensor gap.
    const s = 1_000
    shift = 0
    await feed(api, tote, [
      { ts: dispatchedAt + 10 * s, temp_c: 5 },
      { ts: dispatchedAt + 60 * s, temp_c: 9 },
      { ts: dispatchedAt + 420 * s, temp_c: 9.5 }, // out of range past the grace: temperature.excursion
      { ts: dispatchedAt + 480 * s, temp_c: 5 }, // back in range: temperature.recovered
      { ts: dispatchedAt + 1_500 * s, temp_c: 5 }, // after a 17-minute silence: sensor.offline
    ])
    // The excursion's alarm, cleared unseen, is escalated after the pharmacy's second; then assigned and acknowledged.
    const alarms = `/v1/alarms?delivery_id=${rx.body.delivery_id}`
    await expect
      .poll(async () => (await call('GET', `${alarms}&state=CLEARED_UNACK`, 200, { token: admin })).body.data[0]?.escalated_at ?? null, {
        timeout: 20_000,
      })
      .not.toBeNull()
    const alarm = (await call('GET', alarms, 200, { token: admin })).body.data[0].id
    await call('POST', `/v1/alarms/${alarm}/assign`, 200, { token: admin, json: { user: world.user } })
    await call('POST', `/v1/alarms/${alarm}/acknowledge`, 200, { token: admin, json: { note: 'Reviewed the trace: 8 minutes at 9.5 °C' } })
    await call('POST', `/v1/alarms/${alarm}/acknowledge`, 409, { token: admin, json: { note: 'Again' } })

    // Two pharmacies that want outcomes written back: one answers, the other cannot be reached.
    const desk = `http://127.0.0.1:${(pharmacyDesk.address() as AddressInfo).port}/writeback`
    for (const [name, url] of [
      ['Answering Pharmacy', desk],
      ['Unreachable Pharmacy', 'http://127.0.0.1:9/writeback'],
    ] as const) {
      const pharmacy = (
        await call('POST', '/v1/pharmacies', 201, {
          token: admin,
          json: {
            name,
            address: { line1: '2 Elm St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
            timezone: 'America/Chicago',
            writeback: { url },
          },
        })
      ).body.id
      const dl = (
        await call('POST', '/v1/prescriptions', 201, {
          token: admin,
          json: { patient_id: 'pt_wb', cold_chain: false, pharmacy_id: pharmacy },
          headers: { 'idempotency-key': `rx-${name}` },
        })
      ).body.delivery_id
      await call('POST', `/v1/deliveries/${dl}/dispatch`, 200, { token: admin, json: { fleet_id: world.fleet, driver_id: world.driver } })
      await call('POST', `/v1/deliveries/${dl}/pickup`, 200, { token: admin, json: { from: pharmacy, to: world.driver, signature } })
      await call('POST', `/v1/deliveries/${dl}/deliver`, 200, { token: admin, json: { verification: { method: 'otp', evidence: '1' } } })
    }
    for (const type of ['writeback.completed', 'writeback.failed'])
      await expect
        .poll(async () => (await call('GET', `/v1/events?type=${type}`, 200, { token: admin })).body.data.length, { timeout: 20_000 })
        .toBeGreaterThan(0)
  })

  it('events, webhooks and the audit log', async () => {
    let page = await call('GET', '/v1/events?limit=100', 200, { token: admin })
    for (;;) {
      for (const event of page.body.data) recorded.webhooks[event.type] ??= event
      if (!page.body.next_cursor) break
      page = await call('GET', `/v1/events?limit=100&cursor=${encodeURIComponent(page.body.next_cursor)}`, 200, { token: admin })
    }
    const events = await call('GET', '/v1/events?limit=100', 200, { token: admin })
    world.event = events.body.data.find((e: { type: string }) => e.type === 'cold-chain.break').id
    await call('GET', `/v1/events/${world.event}`, 200, { token: admin })
    await call('GET', `/v1/events?delivery_id=${world.broken}&type=cold-chain.break`, 200, { token: admin })
    await call('GET', '/v1/events/stream?type=cold-chain.break,delivery.failed', 200, { token: admin, stream: true })
    await call('GET', `/v1/fleets/${world.fleet}/exceptions?limit=10`, 200, { token: admin })
    await call('GET', `/v1/fleets/${world.fleet}/exceptions/stream`, 200, {
      token: admin,
      stream: true,
      headers: { 'last-event-id': world.event! },
    })
    await call('GET', `/v1/fleets/${world.fleet}/exceptions/stream`, 422, { token: admin, headers: { 'last-event-id': 'not an id!' } })
    const hook = await call('POST', '/v1/webhooks', 201, {
      token: admin,
      json: { url: 'http://127.0.0.1:9/hooks/rxtrace', events: ['*'], description: 'Operations dashboard', pharmacy_id: world.pharmacy },
    })
    world.webhook = hook.body.id
    await call('GET', '/v1/webhooks', 200, { token: admin })
    await call('GET', `/v1/webhooks/${world.webhook}`, 200, { token: admin })
    await call('PATCH', `/v1/webhooks/${world.webhook}`, 200, {
      token: admin,
      json: { events: ['cold-chain.break', 'delivery.failed'], enabled: true },
    })
    await call('POST', `/v1/webhooks/${world.webhook}/rotate-secret`, 200, { token: admin })
    await call('PATCH', `/v1/webhooks/${world.webhook}`, 200, { token: admin, json: { signature_scheme: 'v1a' } })
    await call('GET', '/.well-known/webhook-keys.json', 200)
    await call('POST', '/v1/webhook-signing-keys/rotate', 200, { token: admin, json: { publish_ahead_s: 0, overlap_s: 3600 } })
    await call('GET', `/v1/webhooks/${world.webhook}/attempts`, 200, { token: admin })
    await call('POST', `/v1/events/${world.event}/redeliver`, 202, { token: admin, json: { endpoint_id: world.webhook } })
    await call('GET', '/v1/audit-events?limit=5', 200, { token: admin })
    await call('GET', '/v1/audit-events/verify?limit=100', 200, { token: admin })
    await call('DELETE', `/v1/webhooks/${world.webhook}`, 204, { token: admin })
  })

  it('products: registration, the versions of their stability data, lookup by NDC', async () => {
    const stability = {
      storage: { min_c: 2, max_c: 8 },
      budgets: [
        { min_c: 8, max_c: 25, allowed_s: 86_400 },
        { min_c: 0, max_c: 2, allowed_s: 3600 },
      ],
      freeze_thaw_max: 0,
      hard_min_c: -0.5,
      source: 'Prescribing information, section 16.2',
    }
    const created = await call('POST', '/v1/products', 201, {
      token: admin,
      json: { ndc: '0002-8215-01', name: 'Insulin lispro 100 units/mL, 10 mL vial', pharmacy_id: world.pharmacy, stability },
    })
    await call('POST', '/v1/products', 422, { token: admin, json: { ndc: '0002821501', name: 'x', stability } })
    const id = created.body.id as string
    await call('PUT', `/v1/products/${id}/stability`, 201, {
      token: admin,
      json: { stability: { ...stability, budgets: [{ min_c: 8, max_c: 25, allowed_s: 172_800 }] }, version: 1 },
    })
    await call('GET', `/v1/products/${id}`, 200, { token: admin })
    await call('GET', '/v1/products?ndc=00002821501', 200, { token: admin })
    await call('GET', `/v1/products/${id}/stability/versions?limit=10`, 200, { token: admin })
    // A cold-chain item of this product, 55 s at 12 °C against a minute allowed: stability.budget-low.
    await call('PUT', `/v1/products/${id}/stability`, 201, {
      token: admin,
      json: { stability: { ...stability, budgets: [{ min_c: 8, max_c: 25, allowed_s: 60 }] } },
    })
    const rx = await call('POST', '/v1/prescriptions', 201, {
      token: admin,
      json: {
        patient_id: 'pt_777',
        cold_chain: true,
        pharmacy_id: world.pharmacy,
        items: [{ description: 'Insulin', ndc: '00002-8215-01', quantity: 1 }],
      },
      headers: { 'idempotency-key': 'rx-stability' },
    })
    const tote = await api.tote(admin, { pharmacy_id: world.pharmacy! })
    await call('POST', `/v1/deliveries/${rx.body.delivery_id}/dispatch`, 200, {
      token: admin,
      json: { fleet_id: world.fleet, driver_id: world.driver, tote_id: tote.id },
    })
    const at = Date.now() + 1_000
    await feed(api, tote.id, [
      { ts: at, temp_c: 12 },
      { ts: at + 55_000, temp_c: 12 },
    ])
    const low = await call('GET', `/v1/events?type=stability.budget-low&delivery_id=${rx.body.delivery_id}`, 200, { token: admin })
    expect(low.body.data).toHaveLength(1)
    recorded.webhooks['stability.budget-low'] ??= low.body.data[0]

    // A pharmacist's excursion assessment, withdrawn; then the delivery returned, released and sent out again.
    const person = await signedInPerson(api, admin, { role: 'pharmacist', pharmacy_id: world.pharmacy! })
    const pharmacist = person.token
    const deliveryId = rx.body.delivery_id as string
    const assessed = await call('POST', `/v1/deliveries/${deliveryId}/assessments`, 201, {
      token: pharmacist,
      json: {
        ndc: '00002-8215-01',
        band: 0,
        add_back_s: 600,
        justification: 'Manufacturer letter: 10 min more at ≤ 25 °C',
        signature: { meaning: 'assessed', password: person.password },
      },
    })
    await call('DELETE', `/v1/deliveries/${deliveryId}/assessments/${assessed.body.id}`, 200, {
      token: pharmacist,
      json: { signature: { meaning: 'assessed', password: person.password } },
    })
    const signature = 'data:image/png;base64,AAAA'
    await call('POST', `/v1/deliveries/${deliveryId}/pickup`, 200, {
      token: admin,
      json: { from: world.pharmacy, to: world.driver, signature },
    })
    await call('POST', `/v1/deliveries/${deliveryId}/return`, 200, {
      token: admin,
      json: { from: world.driver, to: world.pharmacy, signature },
    })
    await call('POST', `/v1/deliveries/${deliveryId}/disposition`, 200, {
      token: pharmacist,
      json: { decision: 'release', note: 'reviewed', signature: { meaning: 'released', password: person.password } },
    })
    await call('POST', `/v1/prescriptions/${rx.body.rx_id}/redeliver`, 201, { token: admin, headers: { 'idempotency-key': 'redeliver-1' } })
  })

  it('every /v1 operation answers 401, 403, 404 and 422 as documented', async () => {
    const readOnly = (
      await call('POST', '/oauth/token', 200, {
        form: { grant_type: 'client_credentials', scope: 'audit:read' },
        basic: [ADMIN.id, ADMIN.secret],
      })
    ).body.access_token
    const fleetOnly = (
      await call('POST', '/oauth/token', 200, {
        form: { grant_type: 'client_credentials', scope: 'fleet:read' },
        basic: [ADMIN.id, ADMIN.secret],
      })
    ).body.access_token
    for (const { path, method, op } of validator.operations.filter((o) => o.path.startsWith('/v1/'))) {
      const scope = (op.security?.[0] as { bearer: string[] }).bearer[0]
      // Required query parameters (a reconciliation's period) are sent as its first success sent them.
      const query = (op.parameters ?? []).some((p) => p.in === 'query' && (p as { required?: boolean }).required)
        ? `?${queries.get(op.operationId) ?? ''}`
        : ''
      const missing = path.replace(/\{id\}/g, 'xx_01jd0000000000000000000000') + query
      const verb = method.toUpperCase()
      const body = requests.get(op.operationId)
      // A body that is not JSON (a statement as JSON lines or CSV) is sent in its own media type.
      const json = !op.requestBody || Boolean(op.requestBody.content['application/json'])
      const raw = rawRequests.get(op.operationId)
      const withBody = op.requestBody
        ? json
          ? { json: body ?? {} }
          : { raw: raw?.raw ?? '', contentType: raw?.contentType ?? Object.keys(op.requestBody.content)[0]! }
        : {}
      const key = (why: string) => ({ 'idempotency-key': `${why}-${op.operationId}` })
      await call(verb, missing, 401, { ...withBody, headers: key('anon') })
      await call(verb, missing, 403, { token: scope === 'audit:read' ? fleetOnly : readOnly, ...withBody, headers: key('scope') })
      if (path.includes('{id}'))
        await call(verb, missing, 404, { token: admin, ...withBody, headers: { 'idempotency-key': `missing-${op.operationId}` } })
      if (op.requestBody) {
        // An image's 422: a PNG sent as a JPEG, to a delivery that takes images.
        const image = op.operationId === 'uploadAttachment'
        const invalid = json
          ? { json: { not_a_field: true } }
          : image
            ? { raw: Buffer.from(PNG_1PX, 'base64'), contentType: 'image/jpeg' }
            : { raw: 'not a line of a statement\n', contentType: withBody.contentType }
        await call(verb, missing.replace(/xx_01jd\w+/, json || image ? world.broken! : world.fleet!), 422, {
          token: admin,
          ...invalid,
          headers: { 'idempotency-key': `bad-${op.operationId}` },
        })
        if (json)
          await call(verb, missing, 400, { token: admin, raw: '{"unterminated', headers: { 'idempotency-key': `raw-${op.operationId}` } })
        await call(verb, missing, 415, {
          token: admin,
          raw: 'plain text',
          contentType: 'text/plain',
          headers: { 'idempotency-key': `txt-${op.operationId}` },
        })
      }
    }
  })

  it('answers what the middleware and the error handler refuse as documented: 405, 413, 415, 422, 429, 500, 503', async () => {
    const problem = (answer: Answer, code: string) => {
      expect(answer.headers.get('content-type')).toBe('application/problem+json')
      expect(answer.body).toMatchObject({ code, status: answer.status })
    }
    problem(await call('DELETE', '/v1/pharmacies', 405, { token: admin }), 'method_not_allowed')
    problem(await call('PUT', '/oauth/token', 405), 'method_not_allowed')
    problem(await call('POST', '/.well-known/jwks.json', 405), 'method_not_allowed')
    const huge = 'x'.repeat(300 * 1024)
    problem(await call('POST', '/v1/fleets', 413, { token: admin, json: { name: huge } }), 'payload_too_large')
    problem(await call('PATCH', `/v1/fleets/${world.fleet}`, 413, { token: admin, json: { name: huge } }), 'payload_too_large')
    problem(await call('POST', '/oauth/token', 413, { form: { grant_type: 'client_credentials', padding: huge } }), 'payload_too_large')
    problem(
      await call('POST', '/v1/fleets', 415, { token: admin, raw: 'name=Fleet', contentType: 'application/x-www-form-urlencoded' }),
      'unsupported_media_type',
    )
    problem(await call('GET', '/v1/fleets?limit=1000', 422, { token: admin }), 'validation_failed')
    const rx = { patient_id: 'pt_reuse', cold_chain: false, pharmacy_id: world.pharmacy }
    await call('POST', '/v1/prescriptions', 201, { token: admin, json: rx, headers: { 'idempotency-key': 'rx-reused' } })
    problem(
      await call('POST', '/v1/prescriptions', 422, {
        token: admin,
        json: { ...rx, patient_id: 'pt_other' },
        headers: { 'idempotency-key': 'rx-reused' },
      }),
      'idempotency_key_reused',
    )

    // 429: a copy of the service with small allowances, for a client and for an address at /oauth.
    const tight = await startTestService({
      RATE_LIMIT_RPS: '0.001',
      RATE_LIMIT_BURST: '2',
      OAUTH_ADDRESS_RPS: '0.001',
      OAUTH_ADDRESS_BURST: '2',
    })
    try {
      const { httpPort } = await tight.service.start()
      const at = { base: `http://127.0.0.1:${httpPort}` }
      const form = { grant_type: 'client_credentials' }
      const token = (await call('POST', '/oauth/token', 200, { ...at, form, basic: [ADMIN.id, ADMIN.secret] })).body.access_token
      await call('POST', '/oauth/token', 200, { ...at, form, basic: [ADMIN.id, ADMIN.secret] })
      const throttled = await call('POST', '/oauth/token', 429, { ...at, form, basic: [ADMIN.id, ADMIN.secret] })
      expect(throttled.body).toMatchObject({ error: 'rate_limited' })
      expect(Number(throttled.headers.get('retry-after'))).toBeGreaterThan(0)
      await call('GET', '/v1/fleets', 200, { ...at, token })
      await call('GET', '/v1/fleets', 200, { ...at, token })
      const limited = await call('GET', '/v1/fleets', 429, { ...at, token })
      problem(limited, 'rate_limited')
      expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0)
    } finally {
      await tight.stop()
    }

    // Last, as they break the store under the running service: a full database is 503, a missing table 500.
    const db = api.service.db
    const [{ page_count }] = (await sql<{ page_count: number }>`PRAGMA page_count`.execute(db)).rows as [{ page_count: number }]
    await sql.raw(`PRAGMA max_page_count = ${page_count}`).execute(db)
    let full: Answer | undefined
    for (let i = 0; i < 50 && full?.status !== 503; i++)
      full = await call('POST', '/v1/fleets', null, { token: admin, json: { name: `Fleet ${i} ${'y'.repeat(190)}` } })
    problem(full!, 'not_ready')
    expect(Number(full!.headers.get('retry-after'))).toBeGreaterThan(0)
    await sql`drop table fleets`.execute(db)
    problem(await call('GET', '/v1/fleets', 500, { token: admin }), 'internal')
  })

  it('documents the data of every event type the service emits, with an example that validates', () => {
    const committed = JSON.parse(readFileSync(EXAMPLES_FILE, 'utf8')) as typeof recorded
    const resolve = (schema: any): any => (schema?.$ref ? resolve(doc.components!.schemas[schema.$ref.split('/').pop()]) : schema)
    const lacking: string[] = []
    for (const type of eventTypes) {
      const body = doc.webhooks?.[type]?.post?.requestBody?.content['application/json']
      const data = resolve((body?.schema as any)?.allOf?.[1]?.properties?.data)
      if (!data?.properties || Object.keys(data.properties).length === 0) lacking.push(`${type}: data schema`)
      if (committed.webhooks[type] === undefined) lacking.push(`${type}: example`)
      if (!recorded.webhooks[type]) lacking.push(`${type}: never raised by this test`)
      // What the service really sent has no member the schema does not describe.
      const sent = (recorded.webhooks[type] as { data?: Record<string, unknown> } | undefined)?.data ?? {}
      for (const member of Object.keys(sent)) if (!data?.properties?.[member]) lacking.push(`${type}: data.${member} not described`)
    }
    expect(lacking).toEqual([])
  })

  it('found every answer as the document describes it', () => {
    expect(problems).toEqual([])
  })

  it('saw every operation of the document succeed', () => {
    const never = validator.operations
      .filter(({ op }) => ![...(seen.get(op.operationId) ?? [])].some((s) => s < 400))
      .map(({ op }) => op.operationId)
    expect(never).toEqual([])
  })

  it('gives every operation an operationId, a summary and an example; every webhook its envelope and an example', () => {
    if (UPDATE) writeFileSync(EXAMPLES_FILE, `${JSON.stringify(recorded, null, 2)}\n`)
    const committed = JSON.parse(readFileSync(EXAMPLES_FILE, 'utf8')) as typeof recorded
    const version = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version
    expect(doc.info.version).toBe(version)
    const lacking: string[] = []
    for (const { path, method, op } of validator.operations) {
      if (!op.operationId || !op.summary) lacking.push(`${method} ${path}: operationId or summary`)
      const examples = [
        ...(op.parameters ?? []).map((p) => p.example ?? (p.schema as { example?: unknown } | undefined)?.example),
        ...[
          ...Object.values(op.requestBody?.content ?? {}),
          ...Object.values(op.responses).flatMap((r) => Object.values(r.content ?? {})),
        ].map((m) => m.example),
      ].filter((example) => example !== undefined)
      if (examples.length === 0) lacking.push(`${method} ${path}: example`)
    }
    if (!UPDATE) expect(lacking).toEqual([]) // the document read at start predates the examples just written
    // The committed examples are real answers: each still validates against its schema.
    for (const { path, method, op } of validator.operations) {
      const example = committed.operations[op.operationId] as
        { response?: { status: string; contentType: string; body?: unknown } } | undefined
      if (!example?.response || example.response.body === undefined || !/json/.test(example.response.contentType)) continue
      const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')
      expect(
        validator.validates(
          `/paths/${token(path)}/${method}/responses/${example.response.status}/content/${token(example.response.contentType)}/schema`,
          example.response.body,
        ),
      ).toEqual([])
    }
    const webhooks = Object.entries(doc.webhooks ?? {})
    expect(webhooks.map(([type]) => type).sort()).toEqual(expect.arrayContaining(Object.keys(recorded.webhooks)))
    for (const [type, item] of webhooks) {
      expect(item.post?.operationId, type).toBeTruthy()
      const media = item.post!.requestBody!.content['application/json']!
      if (committed.webhooks[type] !== undefined && !UPDATE) {
        expect(media.example, type).toEqual(committed.webhooks[type])
        expect(validator.validates(`/webhooks/${token(type)}/post/requestBody/content/application~1json/schema`, media.example)).toEqual([])
      }
    }
  })
})

const token = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1')
const PNG_1PX = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='
