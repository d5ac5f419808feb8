/**
 * The service under test for `npm run bench:ingest`: started as its own process exactly as
 * `npm start` would (minus npm), then given, over its public HTTP API, what a real deployment
 * has: a pharmacy, a fleet with a driver, totes with MQTT credentials, and cold-chain
 * prescriptions dispatched with those totes (so readings are bound and judged).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import type { ToteCredentials } from './ingest-protocol.js'

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url))

// Start-up runs migrations and creates a signing key; on a busy 2-core machine that takes seconds.
const READY_TIMEOUT_MS = 60_000
const TAIL_BYTES = 16_384

/** A port nobody listens on right now (the kernel picks it; released for the child to bind). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

export type ServiceChild = {
  baseUrl: string
  child: ChildProcess
  pid: number
  output(): string
  /** SIGTERM (graceful stop: flushes telemetry), then the exit code. */
  stop(): Promise<number | null>
}

export async function startService({ env, httpPort, nodeArgs = [] }: { env: NodeJS.ProcessEnv; httpPort: number; nodeArgs?: string[] }): Promise<ServiceChild> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', 'src/main.ts'], { cwd: repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let tail = ''
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-TAIL_BYTES)
  }
  child.stdout!.on('data', keep)
  child.stderr!.on('data', keep)
  // Debugging aid: the service's own log lines (LOG_LEVEL=warn) on our stderr as they come.
  if (process.env.BENCH_SERVICE_STDERR) child.stderr!.on('data', (chunk: Buffer) => process.stderr.write(chunk))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  const baseUrl = `http://127.0.0.1:${httpPort}`
  const deadline = Date.now() + READY_TIMEOUT_MS
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the service exited with code ${child.exitCode} before it was ready:\n${tail}`)
    if (Date.now() > deadline) {
      child.kill('SIGKILL')
      throw new Error(`the service was not ready within ${READY_TIMEOUT_MS / 1_000} s:\n${tail}`)
    }
    if (await fetch(`${baseUrl}/readyz`).then((r) => r.ok, () => false)) break
    await new Promise((r) => setTimeout(r, 100))
  }
  return {
    baseUrl, child, pid: child.pid!,
    output: () => tail,
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM')
      return exited
    },
  }
}

/** Runs `task` over `items` with at most `parallel` at a time; results keep the input order. */
export async function inParallel<T, R>(items: readonly T[], parallel: number, task: (item: T, i: number) => Promise<R>): Promise<R[]> {
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
      const res = await fetch(`${baseUrl}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`, // RFC 6749 §2.3.1
        },
        body: 'grant_type=client_credentials',
      })
      const json = (await res.json()) as { access_token?: string }
      if (!json.access_token) throw new Error(`token request failed: ${res.status} ${JSON.stringify(json)}`)
      token = json.access_token
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
export async function createFixture(baseUrl: string, admin: { id: string; secret: string }, { totes, bound, parallel = 16, onProgress = (_: string) => {} }: {
  totes: number; bound: number; parallel?: number; onProgress?: (line: string) => void
}): Promise<Fixture> {
  const api = apiClient(baseUrl)
  await api.login(admin.id, admin.secret)
  const pharmacy = await api.post<{ id: string }>('/v1/pharmacies', {
    name: 'Bench Pharmacy', address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' }, timezone: 'America/Chicago',
  })
  const fleet = await api.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
  const driver = await api.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })

  const started = Date.now()
  const creds = await inParallel(Array.from({ length: totes }, (_, i) => i), parallel, async (i) => {
    const tote = await api.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', { serial: `bench-${i}`, fleet_id: fleet.id })
    if ((i + 1) % 1_000 === 0) onProgress(`${i + 1} totes registered (${Math.round((Date.now() - started) / 100) / 10} s)`)
    return { id: tote.id, username: tote.mqtt.username, password: tote.mqtt.password }
  })

  const deliveries = new Map<string, string>()
  await inParallel(creds.slice(0, bound), parallel, async (tote, i) => {
    const rx = await api.post<{ delivery_id: string }>('/v1/prescriptions', {
      patient_id: `pt_bench_${i}`, pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated',
    }, { 'idempotency-key': `bench-rx-${i}` })
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: driver.id, tote_id: tote.id })
    deliveries.set(tote.id, rx.delivery_id)
    if ((i + 1) % 250 === 0) onProgress(`${i + 1} cold-chain deliveries dispatched`)
  })
  return { pharmacyId: pharmacy.id, fleetId: fleet.id, driverId: driver.id, totes: creds, deliveries }
}
