import { loadConfig } from '../../src/config.js'
import { buildService, type Service, type ServiceOverrides } from '../../src/service.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'

export const ADMIN = { id: 'cl_admin', secret: 'admin-secret-for-tests-only-0123' }

/** The settings every in-process test service starts from: quiet, ephemeral ports, no WebSocket, no throttle. */
export const TEST_ENV: Record<string, string> = {
  LOG_LEVEL: 'silent',
  PORT: '0',
  HOST: '127.0.0.1',
  MQTT_PORT: '0',
  MQTT_WS_PORT: 'off',
  ISSUER: 'http://rxtrace.test',
  ADMIN_CLIENT_ID: ADMIN.id,
  ADMIN_CLIENT_SECRET: ADMIN.secret,
  RATE_LIMIT_RPS: '100000',
  RATE_LIMIT_BURST: '100000',
  // Suites share one address (or none, in-process) and send many tokens, good and bad: the
  // throttles are proved by their own tests with their own settings.
  RATE_LIMIT_TENANT_RPS: '100000',
  RATE_LIMIT_TENANT_BURST: '100000',
  OAUTH_ADDRESS_RPS: '100000',
  OAUTH_ADDRESS_BURST: '100000',
  OAUTH_CLIENT_RPS: '100000',
  OAUTH_CLIENT_BURST: '100000',
  INVALID_TOKEN_RPS: '100000',
  INVALID_TOKEN_BURST: '100000',
  TRACKING_ADDRESS_RPS: '100000',
  TRACKING_ADDRESS_BURST: '100000',
  TRACKING_LINK_RPS: '100000',
  TRACKING_LINK_BURST: '100000',
  REORDER_WINDOW_S: '0',
  WEBHOOK_ALLOW_PRIVATE: 'true',
}

/** The whole service in-process on an in-memory SQLite store; nothing listens unless a test starts it. */
export async function startTestService(env: Record<string, string> = {}, overrides: ServiceOverrides = {}) {
  const config = loadConfig({ ...TEST_ENV, ...env })
  const service = await buildService(config, {
    store: { kind: 'sqlite', file: ':memory:' },
    sink: createSqliteSink({ path: ':memory:' }),
    ...overrides,
  })
  return withApi(service)
}

export type Reply<T = any> = { status: number; body: T; headers: Headers; text: string }

/** Small request helpers over `app.request()`: JSON in, JSON out, a token when given. */
export function withApi(service: Service) {
  async function request<T = any>(
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; headers?: Record<string, string>; raw?: string } = {},
  ): Promise<Reply<T>> {
    const headers: Record<string, string> = { ...opts.headers }
    if (opts.token) headers.authorization = `Bearer ${opts.token}`
    let body: string | undefined = opts.raw
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body)
      headers['content-type'] ??= 'application/json'
    }
    const res = await service.app.request(path, { method, headers, body })
    const text = await res.text()
    let parsed: unknown = text
    try {
      parsed = text ? JSON.parse(text) : null
    } catch {
      /* not JSON: keep the text */
    }
    return { status: res.status, body: parsed as T, headers: res.headers, text }
  }

  async function tokenFor(clientId: string, secret: string, scope?: string): Promise<string> {
    const form = new URLSearchParams({ grant_type: 'client_credentials', ...(scope ? { scope } : {}) })
    const res = await service.app.request('/oauth/token', {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${clientId}:${secret}`).toString('base64')}`,
      },
      body: form.toString(),
    })
    const json = (await res.json()) as { access_token?: string }
    if (!json.access_token) throw new Error(`token request failed: ${res.status} ${JSON.stringify(json)}`)
    return json.access_token
  }

  let keyCounter = 0
  const api = {
    service,
    request,
    tokenFor,
    adminToken: (scope?: string) => tokenFor(ADMIN.id, ADMIN.secret, scope),
    get: <T = any>(path: string, token: string) => request<T>('GET', path, { token }),
    post: <T = any>(path: string, token: string, body?: unknown, headers?: Record<string, string>) =>
      request<T>('POST', path, { token, body, headers }),
    /** A pharmacy, registered by the admin. */
    async pharmacy(token: string, extra: Record<string, unknown> = {}) {
      const res = await api.post('/v1/pharmacies', token, {
        name: 'Main Street Pharmacy',
        address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
        timezone: 'America/Chicago',
        ...extra,
      })
      if (res.status !== 201) throw new Error(`pharmacy: ${res.status} ${res.text}`)
      return res.body as { id: string }
    },
    async prescription(token: string, body: Record<string, unknown>, key = `key-${++keyCounter}-${Math.random()}`) {
      const res = await api.post(
        '/v1/prescriptions',
        token,
        { patient_id: 'pt_123', cold_chain: false, ...body },
        { 'idempotency-key': key },
      )
      if (res.status !== 201) throw new Error(`prescription: ${res.status} ${res.text}`)
      return res.body as { rx_id: string; delivery_id: string; audit_hash: string; [k: string]: unknown }
    },
    async fleetWithDriver(token: string) {
      const fleet = (await api.post('/v1/fleets', token, { name: 'Speedy Couriers' })).body as { id: string }
      const driver = (await api.post(`/v1/fleets/${fleet.id}/drivers`, token, { name: 'Dana Driver' })).body as { id: string }
      const driver2 = (await api.post(`/v1/fleets/${fleet.id}/drivers`, token, { name: 'Sam Second' })).body as { id: string }
      return { fleetId: fleet.id, driverId: driver.id, driver2Id: driver2.id }
    },
    async tote(token: string, owner: { pharmacy_id?: string; fleet_id?: string }, serial = `T-${++keyCounter}-${Date.now()}`) {
      const res = await api.post('/v1/totes', token, { serial, ...owner })
      if (res.status !== 201) throw new Error(`tote: ${res.status} ${res.text}`)
      return res.body as { id: string; mqtt: { username: string; password: string } }
    },
    stop: () => service.stop(),
  }
  return api
}

export type TestApi = ReturnType<typeof withApi>
