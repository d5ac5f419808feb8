/**
 * The service under test for `npm run bench:ingest`: started as its own process exactly as
 * `npm start` would (minus npm), then given, over its public HTTP API, what a real deployment
 * has: a pharmacy, a fleet with a driver, totes with MQTT credentials, and cold-chain
 * prescriptions dispatched with those totes (so readings are bound and judged).
 */
import { clientCredentialsToken } from './api-client.js'
import type { ToteCredentials } from './ingest-protocol.js'
import { startServiceProcess, type ServiceProcess } from './service-process.js'

export { freePort, repoRoot } from './service-process.js'

export type ServiceChild = ServiceProcess & { pid: number }

/** The service as its own process (see service-process.ts), with its pid for /proc readings. */
export async function startService({
  env,
  httpPort,
  nodeArgs = [],
}: {
  env: NodeJS.ProcessEnv
  httpPort: number
  nodeArgs?: string[]
}): Promise<ServiceChild> {
  const service = await startServiceProcess({ env, port: httpPort, nodeArgs })
  return { ...service, pid: service.child.pid! }
}

/** Runs `task` over `items` with at most `parallel` at a time; results keep the input order. */
async function inParallel<T, R>(items: readonly T[], parallel: number, task: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  const worker = async () => {
    while (next < items.length) {
      const i = next++
      results[i] = await task(items[i]!, i)
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, worker))
  return results
}

export function apiClient(baseUrl: string) {
  let token = ''
  const call = async <T>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<T> => {
    const res = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    })
    const text = await res.text()
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`)
    return JSON.parse(text) as T
  }
  return {
    async login(clientId: string, secret: string): Promise<void> {
      token = await clientCredentialsToken(baseUrl, clientId, secret)
    },
    post: <T>(path: string, body: unknown, headers?: Record<string, string>) => call<T>('POST', path, body, headers),
    get: <T>(path: string) => call<T>('GET', path),
  }
}

export type Fixture = {
  pharmacyId: string
  fleetId: string
  driverId: string
  totes: ToteCredentials[]
  /** tote id → delivery id, for the first `bound` totes. */
  deliveries: Map<string, string>
}

/** A pharmacy, a fleet with a driver, `totes` totes, and a dispatched cold-chain delivery for each of the first `bound`. */
/** bench:ingest --products: three products, each 2–8 °C storage and six bands from 0 to 18 °C (nothing above 18 °C). */
const BENCH_PRODUCT_NDCS = ['00002-8215-01', '00003-0001-11', '00004-0002-22']
const BENCH_STABILITY = {
  storage: { min_c: 2, max_c: 8 },
  budgets: [
    { min_c: 8, max_c: 10, allowed_s: 36_000 },
    { min_c: 10, max_c: 14, allowed_s: 14_400 },
    { min_c: 14, max_c: 18, allowed_s: 3600 },
    { min_c: 1, max_c: 2, allowed_s: 7200 },
    { min_c: 0.5, max_c: 1, allowed_s: 1800 },
    { min_c: 0, max_c: 0.5, allowed_s: 600 },
  ],
  freeze_thaw_max: 3,
  source: 'bench',
}

export async function createFixture(
  baseUrl: string,
  admin: { id: string; secret: string },
  {
    totes,
    bound,
    parallel = 16,
    onProgress = (_: string) => {},
    products = false,
  }: {
    totes: number
    bound: number
    parallel?: number
    onProgress?: (line: string) => void
    /** Every cold-chain delivery carries three items, each judged by a product with six bands (bench:ingest --products). */
    products?: boolean
  },
): Promise<Fixture> {
  const api = apiClient(baseUrl)
  await api.login(admin.id, admin.secret)
  const pharmacy = await api.post<{ id: string }>('/v1/pharmacies', {
    name: 'Bench Pharmacy',
    address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
    timezone: 'America/Chicago',
  })
  const fleet = await api.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
  const driver = await api.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })

  const started = Date.now()
  const creds = await inParallel(
    Array.from({ length: totes }, (_, i) => i),
    parallel,
    async (i) => {
      const tote = await api.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
        serial: `bench-${i}`,
        fleet_id: fleet.id,
      })
      if ((i + 1) % 1_000 === 0) onProgress(`${i + 1} totes registered (${Math.round((Date.now() - started) / 100) / 10} s)`)
      return { id: tote.id, username: tote.mqtt.username, password: tote.mqtt.password }
    },
  )

  if (products)
    for (const ndc of BENCH_PRODUCT_NDCS)
      await api.post('/v1/products', { ndc, name: `Bench product ${ndc}`, pharmacy_id: pharmacy.id, stability: BENCH_STABILITY })
  const items = products ? BENCH_PRODUCT_NDCS.map((ndc) => ({ description: `Bench product ${ndc}`, ndc, quantity: 1 })) : undefined

  const deliveries = new Map<string, string>()
  await inParallel(creds.slice(0, bound), parallel, async (tote, i) => {
    const rx = await api.post<{ delivery_id: string }>(
      '/v1/prescriptions',
      {
        patient_id: `pt_bench_${i}`,
        pharmacy_id: pharmacy.id,
        cold_chain: true,
        temperature_profile: 'refrigerated',
        ...(items ? { items } : {}),
      },
      { 'idempotency-key': `bench-rx-${i}` },
    )
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: driver.id, tote_id: tote.id })
    deliveries.set(tote.id, rx.delivery_id)
    if ((i + 1) % 250 === 0) onProgress(`${i + 1} cold-chain deliveries dispatched`)
  })
  return { pharmacyId: pharmacy.id, fleetId: fleet.id, driverId: driver.id, totes: creds, deliveries }
}
