import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { allScopes } from '../../src/auth/scopes.js'
import { startTestService, type TestApi } from '../helpers/service.js'

/**
 * The walls of every /v1 route, table-driven (docs/security.md, Who may call each route): no
 * token is 401, a token without the route's scope 403, and a token of another tenant 404 on
 * whatever names a resource of this one. A route added to the API and not to `walls` below
 * fails the first test: say who may call it, and add its probe.
 */

type Wall = 'tenant' | 'fleet' | 'none'
/** Each operation of the OpenAPI document: whose resource its `{id}` names (probed below), or 'none'. */
const STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [{ min_c: 8, max_c: 25, allowed_s: 3600 }],
  freeze_thaw_max: null,
  source: 'label',
}

const walls: Record<string, Wall> = {
  'GET /v1/audit-events': 'none',
  'GET /v1/audit-events/verify': 'none',
  'POST /v1/oauth/clients': 'none',
  'GET /v1/oauth/clients/{id}': 'tenant',
  'POST /v1/oauth/clients/{id}/rotate-secret': 'tenant',
  'POST /v1/oauth/signing-keys/rotate': 'none',
  'POST /v1/webhook-signing-keys/rotate': 'none',
  'GET /v1/deliveries/{id}': 'tenant',
  'GET /v1/deliveries': 'none',
  'GET /v1/deliveries/{id}/custody/verify': 'tenant',
  'GET /v1/deliveries/{id}/parties': 'tenant',
  'POST /v1/deliveries/{id}/attachments': 'tenant',
  'GET /v1/deliveries/{id}/attachments/{attachment_id}': 'tenant',
  'POST /v1/deliveries/{id}/dispatch': 'tenant',
  'POST /v1/deliveries/{id}/pickup': 'tenant',
  'POST /v1/deliveries/{id}/handoff': 'tenant',
  'POST /v1/deliveries/{id}/return': 'tenant',
  'POST /v1/deliveries/{id}/deliver': 'tenant',
  'POST /v1/deliveries/{id}/fail': 'tenant',
  'POST /v1/deliveries/{id}/reattempt': 'tenant',
  'POST /v1/deliveries/{id}/cancel': 'tenant',
  'POST /v1/deliveries/{id}/disposition': 'tenant',
  'POST /v1/deliveries/{id}/tracking-links': 'tenant',
  'POST /v1/deliveries/{id}/assessments': 'tenant',
  'DELETE /v1/deliveries/{id}/assessments/{assessment_id}': 'tenant',
  'GET /v1/deliveries/{id}/temperature': 'tenant',
  'GET /v1/deliveries/{id}/temperature.svg': 'tenant',
  'GET /v1/deliveries/{id}/epcis': 'tenant',
  'GET /v1/deliveries/{id}/locations': 'tenant',
  'PUT /v1/deliveries/{id}/eta': 'tenant',
  'POST /v1/drivers/{id}/locations': 'fleet',
  'GET /v1/epcis/events': 'none',
  'GET /v1/events': 'none',
  'GET /v1/events/stream': 'none',
  'GET /v1/events/{id}': 'tenant',
  'POST /v1/events/{id}/redeliver': 'tenant',
  'GET /v1/fleets/{id}/dashboard': 'fleet',
  'POST /v1/fleets/{id}/embed-sessions': 'fleet',
  'GET /v1/fleets/{id}/exceptions': 'fleet',
  'GET /v1/fleets/{id}/exceptions/stream': 'fleet',
  'POST /v1/fleets': 'none',
  'GET /v1/fleets/{id}': 'fleet',
  'GET /v1/fleets': 'none',
  'PATCH /v1/fleets/{id}': 'fleet',
  'POST /v1/fleets/{id}/drivers': 'fleet',
  'GET /v1/fleets/{id}/drivers': 'fleet',
  'GET /v1/fleets/{id}/rate-card': 'fleet',
  'PUT /v1/fleets/{id}/rate-card': 'fleet',
  'GET /v1/fleets/{id}/rate-card/versions': 'fleet',
  'GET /v1/fleets/{id}/reconciliation': 'fleet',
  'POST /v1/fleets/{id}/reconciliation': 'fleet',
  'POST /v1/pharmacies': 'none',
  'GET /v1/alarms': 'none',
  'POST /v1/alarms/{id}/acknowledge': 'tenant',
  'POST /v1/alarms/{id}/assign': 'tenant',
  'GET /v1/pharmacies/{id}': 'tenant',
  'PATCH /v1/pharmacies/{id}': 'tenant',
  'GET /v1/pharmacies': 'none',
  'POST /v1/prescriptions': 'none',
  'GET /v1/prescriptions/{id}': 'tenant',
  'GET /v1/prescriptions': 'none',
  'POST /v1/prescriptions/{id}/redeliver': 'tenant',
  'POST /v1/products': 'none',
  'GET /v1/products': 'none',
  'GET /v1/products/{id}': 'tenant',
  'PUT /v1/products/{id}/stability': 'tenant',
  'GET /v1/products/{id}/stability/versions': 'tenant',
  'POST /v1/totes': 'none',
  'GET /v1/totes/{id}': 'tenant',
  'PATCH /v1/totes/{id}': 'tenant',
  'GET /v1/totes/{id}/readings': 'tenant',
  'GET /v1/totes': 'none',
  'POST /v1/users': 'none',
  'GET /v1/users': 'none',
  'GET /v1/users/{id}': 'tenant',
  'PATCH /v1/users/{id}': 'tenant',
  'POST /v1/webhooks': 'none',
  'GET /v1/webhooks': 'none',
  'GET /v1/webhooks/{id}': 'tenant',
  'PATCH /v1/webhooks/{id}': 'tenant',
  'DELETE /v1/webhooks/{id}': 'tenant',
  'POST /v1/webhooks/{id}/rotate-secret': 'tenant',
  'GET /v1/webhooks/{id}/attempts': 'tenant',
}

/** A body each write accepts, so that the wall, not validation, is what answers. */
const bodies: Record<string, unknown> = {
  dispatch: { fleet_id: 'fl_01jd0000000000000000000000' },
  pickup: { from: 'patient', to: 'patient', signature: 's' },
  handoff: { from: 'patient', to: 'patient', signature: 's' },
  return: { from: 'patient', to: 'patient', signature: 's' },
  deliver: { verification: { method: 'otp', evidence: '1' } },
  fail: { reason: 'patient_unavailable', note: 'r' },
  reattempt: {},
  cancel: { reason: 'r' },
  disposition: { decision: 'release', note: 'n', signature: { meaning: 'released', password: 'not checked behind a wall' } },
  'PATCH /v1/webhooks/{id}': { enabled: false },
  'PATCH /v1/users/{id}': { name: 'Renamed' },
  'PATCH /v1/fleets/{id}': { name: 'Renamed' },
  'PATCH /v1/pharmacies/{id}': { calibration_policy: 'warn' },
  'PATCH /v1/totes/{id}': {
    sensor: {
      serial: 'S1',
      model: 'M1',
      accuracy_c: 0.5,
      calibrated_at: '2026-01-01T00:00:00Z',
      calibration_due: '2027-01-01T00:00:00Z',
      certificate_ref: 'CERT-1',
    },
  },
  acknowledge: { note: 'seen' },
  assign: { user: 'us_01jd0000000000000000000000' },
  'POST /v1/fleets/{id}/drivers': { name: 'Intruder' },
  'POST /v1/fleets/{id}/embed-sessions': { ttl_s: 60 },
  'POST /v1/drivers/{id}/locations': { positions: [{ lat: 41.88, lng: -87.63, accuracy_m: 5, at: '2026-01-01T00:00:00Z' }] },
  'PUT /v1/deliveries/{id}/eta': { eta: '2026-01-01T00:00:00Z' },
  'PUT /v1/products/{id}/stability': { stability: STABILITY },
  'POST /v1/deliveries/{id}/assessments': {
    ndc: '00002-8215-01',
    band: 0,
    add_back_s: 60,
    justification: 'walls',
    signature: { meaning: 'assessed', password: 'not checked behind a wall' },
  },
  'DELETE /v1/deliveries/{id}/assessments/{assessment_id}': { signature: { meaning: 'assessed', password: 'not checked behind a wall' } },
  'PUT /v1/fleets/{id}/rate-card': {
    currency: 'USD',
    base_fee_cents: 650,
    per_km_cents: 85,
    cold_chain_surcharge_cents: 300,
    failed_attempt_fee_cents: 400,
    after_hours_multiplier: 1.5,
    commission_bps: 1200,
  },
}

const ALL_PHARMACY =
  'pharmacies:read pharmacies:write prescriptions:read prescriptions:write products:write deliveries:read deliveries:write custody:write telemetry:read cold-chain:disposition webhooks:read webhooks:write totes:write fleet:read clients:write audit:read'
const ALL_FLEET = 'fleet:read fleet:write deliveries:read deliveries:write custody:write telemetry:read webhooks:read webhooks:write'

describe('the walls of every /v1 route', () => {
  let api: TestApi
  let admin: string
  let operations: { method: string; path: string; scope: string }[]
  /** The `{id}` of each tenant-walled route: resources of pharmacy A, dispatched to fleet F. */
  const ids: Record<string, string> = {}
  let pharmacyB: string
  let fleetG: string

  async function restricted(scope: string, tenant: Record<string, string>) {
    const res = await api.post('/v1/oauth/clients', admin, { client_name: 'tenant', scope, ...tenant })
    expect(res.status, res.text).toBe(201)
    return {
      ...(res.body as { client_id: string; client_secret: string }),
      token: await api.tokenFor(res.body.client_id, res.body.client_secret),
    }
  }
  const call = (method: string, path: string, token: string | undefined, key: string) => {
    const auth = token ? { token } : {}
    // A reconciliation names its period; a statement is CSV (or JSON lines), not a JSON body.
    if (path.endsWith('/reconciliation')) path += '?from=2026-11-01T00:00:00Z&to=2026-12-01T00:00:00Z'
    // An image upload is the raw image; the walls answer before its bytes are read.
    if (key === 'POST /v1/deliveries/{id}/attachments')
      return api.request(method, path, { ...auth, raw: 'not read behind a wall', headers: { 'content-type': 'image/png' } })
    if (key === 'POST /v1/fleets/{id}/reconciliation')
      return api.request(method, path, {
        ...auth,
        raw: 'delivery_id,payout_cents\r\n',
        headers: { 'content-type': 'text/csv', 'idempotency-key': `walls-${Math.random()}` },
      })
    const action = path.split('/').at(-1)!
    const body = method === 'GET' || (method === 'DELETE' && !(key in bodies)) ? undefined : (bodies[key] ?? bodies[action] ?? {})
    // Every write accepts an Idempotency-Key, and POST /v1/prescriptions requires one.
    const headers: Record<string, string> = method === 'GET' ? {} : { 'idempotency-key': `walls-${Math.random()}` }
    return api.request(method, path, { ...auth, headers, ...(body === undefined ? {} : { body }) })
  }

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    const doc = (await api.get('/v1/openapi.json', admin)).body
    operations = Object.entries(doc.paths as Record<string, Record<string, { security?: { bearer: string[] }[] }>>).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, scope: op.security?.[0]?.bearer?.[0] ?? '' })),
    )
    const pharmacyA = (await api.pharmacy(admin, { name: 'A' })).id
    pharmacyB = (await api.pharmacy(admin, { name: 'B' })).id
    const fleetF = await api.fleetWithDriver(admin)
    fleetG = (await api.fleetWithDriver(admin)).fleetId
    const a = await restricted(ALL_PHARMACY, { pharmacy_id: pharmacyA })
    const rx = await api.prescription(a.token, {})
    const dispatched = await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, a.token, {
      fleet_id: fleetF.fleetId,
      driver_id: fleetF.driverId,
    })
    expect(dispatched.status, dispatched.text).toBe(200)
    const card = await api.request('PUT', `/v1/fleets/${fleetF.fleetId}/rate-card`, {
      token: admin,
      body: bodies['PUT /v1/fleets/{id}/rate-card'],
    })
    expect(card.status, card.text).toBe(201)
    const event = (await api.get(`/v1/events?delivery_id=${rx.delivery_id}`, a.token)).body.data.at(-1)
    const webhook = await api.post('/v1/webhooks', a.token, { url: 'http://127.0.0.1:9/hook', events: ['*'] })
    expect(webhook.status, webhook.text).toBe(201)
    const user = await api.post('/v1/users', a.token, {
      email: 'tech@example.com',
      name: 'Tech',
      role: 'technician',
      pharmacy_id: pharmacyA,
    })
    expect(user.status, user.text).toBe(201)
    const product = await api.post('/v1/products', admin, {
      ndc: '00002-8215-01',
      name: 'Insulin',
      pharmacy_id: pharmacyA,
      stability: STABILITY,
    })
    expect(product.status, product.text).toBe(201)
    Object.assign(ids, {
      products: product.body.id,
      pharmacies: pharmacyA,
      prescriptions: rx.rx_id,
      deliveries: rx.delivery_id,
      events: event.id,
      totes: (await api.tote(a.token, { pharmacy_id: pharmacyA })).id,
      webhooks: webhook.body.id,
      users: user.body.id,
      clients: a.client_id,
      fleets: fleetF.fleetId,
      drivers: fleetF.driverId,
      alarms: await anAlarmOf(rx.delivery_id, pharmacyA, fleetF.fleetId),
      attachment: await anAttachmentOf(rx.delivery_id),
    })
  })
  afterAll(() => api.stop())

  /** A photo of the delivery, uploaded by the operator (a 1×1 PNG). */
  async function anAttachmentOf(deliveryId: string): Promise<string> {
    const png = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64')
    const res = await api.service.app.request(`/v1/deliveries/${deliveryId}/attachments`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'image/png' },
      body: png,
    })
    expect(res.status).toBe(201)
    return ((await res.json()) as { id: string }).id
  }

  /** An alarm of the delivery, as the rule engine's excursion event would raise it (test/alarms/ raises them from readings). */
  async function anAlarmOf(deliveryId: string, pharmacyId: string, fleetId: string): Promise<string> {
    const at = new Date().toISOString()
    const id = 'al_01jd0000000000000000000001'
    await api.service.db
      .insertInto('alarms')
      .values({
        id,
        delivery_id: deliveryId,
        pharmacy_id: pharmacyId,
        fleet_id: fleetId,
        rx_id: null,
        kind: 'excursion',
        source_key: 'excursion:0',
        state: 'ACTIVE_UNACK',
        raised_at: at,
        cleared_at: null,
        acknowledged_by: null,
        acknowledged_at: null,
        note: null,
        assigned_to: null,
        escalate_at: '2099-01-01T00:00:00.000Z',
        escalated_at: null,
        version: 1,
      })
      .execute()
    return id
  }

  it('knows every operation of the OpenAPI document, and each /v1 one names its scope', () => {
    const documented = operations.filter((o) => o.path.startsWith('/v1/')).map((o) => `${o.method} ${o.path}`)
    expect(documented.sort()).toEqual(Object.keys(walls).sort())
    for (const o of operations.filter((o) => o.path.startsWith('/v1/'))) expect(o.scope, `${o.method} ${o.path}`).not.toBe('')
  })

  it('answers 401 without a token and 403 to a token without the scope, on every /v1 route', async () => {
    // A token of every scope but one: the route's.
    const cache = new Map<string, string>()
    for (const { method, path, scope } of operations.filter((o) => o.path.startsWith('/v1/'))) {
      const concrete = path.replace('{id}', 'xx_01jd0000000000000000000000')
      const key = `${method} ${path}`
      expect((await call(method, concrete, undefined, key)).status, key).toBe(401)
      let token = cache.get(scope)
      if (!token) cache.set(scope, (token = await api.adminToken(otherScopes(scope))))
      const refused = await call(method, concrete, token, key)
      expect([refused.status, refused.body.code], key).toEqual([403, 'insufficient_scope'])
    }
  })

  it("answers 404 to another tenant's token on every route naming a resource", async () => {
    const b = await restricted(ALL_PHARMACY, { pharmacy_id: pharmacyB })
    const g = await restricted(ALL_FLEET, { fleet_id: fleetG })
    for (const [key, wall] of Object.entries(walls)) {
      if (wall === 'none') continue
      const [method, path] = key.split(' ') as [string, string]
      const resource = path.startsWith('/v1/oauth/clients') ? 'clients' : path.split('/')[2]!
      expect(ids[resource], key).toBeDefined()
      const concrete = path.replace('{id}', ids[resource]!).replace('{attachment_id}', ids.attachment!)
      // The id names a real resource: the operator reads it (a stream would not end, so not those).
      if (method === 'GET' && !path.endsWith('/stream')) expect((await call(method, concrete, admin, key)).status, key).toBe(200)
      // A pharmacy's resources against another pharmacy; a fleet's against another fleet.
      const foreign = wall === 'fleet' ? g.token : b.token
      const res = await call(method, concrete, foreign, key)
      expect([res.status, res.body?.code], key).toEqual([404, 'not_found'])
    }
  })
})

const otherScopes = (scope: string) => allScopes.filter((s) => s !== scope).join(' ')
