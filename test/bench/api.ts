/**
 * `npm run bench:api` — HTTP API throughput and latency, measured from outside the service.
 *
 * The service runs as its own process (`node --import tsx src/main.ts`) on SQLite in a fresh
 * temporary DATA_DIR; this script is the client: it gets a real bearer token, registers a
 * pharmacy, then drives load with autocannon in this process:
 *   (a) POST /v1/prescriptions, every request with its own Idempotency-Key, cold chain + profile;
 *   (b) GET /v1/pharmacies/{id}, the cheapest authenticated read.
 * Prints one JSON object on stdout; progress goes to stderr. Besides throughput and latency each
 * phase reports the service's CPU time per request (from /proc, so it stays meaningful when other
 * work shares the machine) and how much of a core the load generator itself used.
 *
 * Options: --connections N (default 32)  --post-seconds S (20)  --get-seconds S (10)
 *          --warmup-seconds S (3, not measured)  --sweep (try 8…128 connections for 5 s first)
 *          --profile (run the service under `node --cpu-prof` and print its hotspots to stderr)
 *          --database-url URL (the entity store in a fresh schema of this PostgreSQL instead of SQLite;
 *          the schema is dropped afterwards)
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { clientCredentialsToken, postJson } from './lib/api-client.js'
import { logServiceProfile } from './lib/cpuprofile.js'
import { drive, type LoadRequest } from './lib/load.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess } from './lib/service-process.js'
import { parseBenchArgs } from './lib/args.js'

// High enough that the per-client token bucket never answers 429 during the run.
const SWEEP_CONNECTIONS = [8, 16, 32, 64, 128]
const SWEEP_SECONDS = 5

const opts = parseBenchArgs(
  'bench:api',
  'HTTP API throughput and latency against the service in its own process (SQLite, fresh temporary DATA_DIR). Prints one JSON object on stdout, progress on stderr.',
  {
    connections: { type: 'string', default: '32' },
    'post-seconds': { type: 'string', default: '20' },
    'get-seconds': { type: 'string', default: '10' },
    'warmup-seconds': { type: 'string', default: '3' },
    sweep: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'database-url': { type: 'string', default: '' },
  },
)
for (const name of ['connections', 'post-seconds', 'get-seconds', 'warmup-seconds'] as const) {
  const value = Number(opts[name])
  if (!Number.isFinite(value) || value < (name === 'warmup-seconds' ? 0 : 1)) {
    process.stderr.write(`bench:api: --${name} must be a number${name === 'warmup-seconds' ? ' ≥ 0' : ' ≥ 1'}\n`)
    process.exit(2)
  }
}
const connections = Number(opts.connections)
const log = (line: string): void => void process.stderr.write(`bench:api ${line}\n`)

/** The body a pharmacy system would send: refrigerated insulin with an address and a deadline. */
function prescriptionBody(pharmacyId: string): string {
  return JSON.stringify({
    patient_id: 'pt_bench_000042',
    cold_chain: true,
    pharmacy_id: pharmacyId,
    temperature_profile: 'refrigerated',
    deliver_by: new Date(Date.now() + 6 * 3_600_000).toISOString(),
    delivery_address: { line1: '742 Evergreen Terrace', city: 'Springfield', region: 'IL', postal_code: '62704', country: 'US' },
    items: [{ description: 'Insulin glargine 100 units/mL, 3 mL pen', ndc: '0088-2220-33', quantity: 5 }],
    external_ref: 'RX-2024-000042',
    metadata: { source: 'bench', channel: 'pharmacy-system' },
  })
}

async function main(): Promise<void> {
  const loadBefore = Math.round(loadavg()[0]! * 100) / 100
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-'))
  const profileDir = join(dataDir, 'profile')
  const port = await freePort()
  const postgres = opts['database-url'] ? await freshSchema(opts['database-url']) : null
  // Copies sharing PostgreSQL must share a key for stored secrets; the service refuses to start without one.
  const store = postgres ? { DATABASE_URL: postgres.url, SECRETS_KEY: randomBytes(32).toString('base64') } : {}
  const env = benchServiceEnv(dataDir, port, { MQTT_PORT: '0', ...store })

  log(`starting the service on port ${port} (DATA_DIR ${dataDir})${opts.profile ? ' under --cpu-prof' : ''}`)
  const service = await startServiceProcess({
    env,
    port,
    nodeArgs: opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
  }).catch(async (error: unknown) => {
    await postgres?.drop()
    throw error
  })
  try {
    const token = await clientCredentialsToken(service.baseUrl, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const pharmacy = await postJson<{ id: string }>(service.baseUrl, '/v1/pharmacies', token, {
      name: 'Bench Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    const auth = { authorization: `Bearer ${token}` }

    let counter = 0
    const run = `${process.pid}-${Date.now()}`
    const postRx: LoadRequest = {
      method: 'POST',
      path: '/v1/prescriptions',
      headers: { ...auth, 'content-type': 'application/json' },
      body: prescriptionBody(pharmacy.id),
      // A fresh key per request: every request creates a prescription, none is a replay.
      setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'idempotency-key': `bench-${run}-${++counter}` } }),
    }
    const getPharmacy: LoadRequest = { method: 'GET', path: `/v1/pharmacies/${pharmacy.id}`, headers: auth }
    // The service's CPU time per request: the figure that still means something when other work
    // shares the machine (wall-clock throughput then measures the neighbours too).
    const load = async (request: LoadRequest, seconds: number, conns = connections) => {
      const cpuBefore = service.cpuMs()
      const ownBefore = process.cpuUsage()
      const figures = await drive({ url: service.baseUrl, connections: conns, seconds, request })
      const cpuAfter = service.cpuMs()
      const own = process.cpuUsage(ownBefore)
      const cpuPerReq =
        cpuBefore === null || cpuAfter === null || figures.total === 0
          ? null
          : Math.round(((cpuAfter - cpuBefore) / figures.total) * 1_000) / 1_000
      // On a 2-core machine the load generator competes with the service: say how much it took.
      const loadGeneratorCorePct = Math.round(((own.user + own.system) / 1_000 / (figures.seconds * 1_000)) * 100)
      return { ...figures, service_cpu_ms_per_req: cpuPerReq, load_generator_core_pct: loadGeneratorCorePct }
    }

    if (opts.sweep) {
      for (const conns of SWEEP_CONNECTIONS) {
        const f = await load(postRx, SWEEP_SECONDS, conns)
        log(
          `sweep POST /v1/prescriptions c=${conns}: ${f.rps} rps, p50 ${f.p50_ms} ms, p99 ${f.p99_ms} ms, errors ${f.errors}, non2xx ${f.non2xx}, service CPU ${f.service_cpu_ms_per_req} ms/req`,
        )
      }
    }
    const warmup = Number(opts['warmup-seconds'])
    if (warmup > 0) {
      log(`warming up ${warmup} s (not measured)`)
      await load(postRx, warmup)
    }
    log(`POST /v1/prescriptions: ${opts['post-seconds']} s, ${connections} connections`)
    const post = await load(postRx, Number(opts['post-seconds']))
    if (warmup > 0) await load(getPharmacy, Math.min(warmup, 2))
    log(`GET /v1/pharmacies/{id}: ${opts['get-seconds']} s, ${connections} connections`)
    const get = await load(getPharmacy, Number(opts['get-seconds']))

    const code = await service.stop()
    if (code !== 0) log(`warning: the service exited with code ${code} after SIGTERM:\n${service.output()}`)
    if (opts.profile) logServiceProfile(profileDir, log)

    process.stdout.write(
      JSON.stringify(
        {
          post_prescriptions: post,
          get_pharmacy: get,
          // How many trivial authenticated reads fit in the time of one create: the price of the write
          // path (idempotency claim + one transaction of four inserts + hashing) over the shared
          // pipeline every /v1 request pays (token check, rate limit, audit, routing, JSON).
          overhead_ratio: Math.round((get.rps / post.rps) * 100) / 100,
          machine: {
            cpus: cpus().length,
            cpu_model: cpus()[0]?.model ?? 'unknown',
            node: process.version,
            loadavg_1m_before: loadBefore,
            loadavg_1m_after: Math.round(loadavg()[0]! * 100) / 100,
          },
        },
        null,
        2,
      ) + '\n',
    )
  } catch (error) {
    log(`failed: ${(error as Error).message}\n--- service output ---\n${service.output()}`)
    process.exitCode = 1
  } finally {
    if (service.child.exitCode === null) await service.stop()
    if (!opts.profile) rmSync(dataDir, { recursive: true, force: true })
    await postgres?.drop()
  }
}

/** A fresh schema of the PostgreSQL at `url`, and the DATABASE_URL that puts the service in it. */
async function freshSchema(url: string): Promise<{ url: string; drop(): Promise<void> }> {
  const schema = `rx_bench_${randomBytes(4).toString('hex')}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`create schema "${schema}"`)
  return {
    url: `${url}?options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    drop: async () => {
      await admin.query(`drop schema "${schema}" cascade`)
      await admin.end()
    },
  }
}

await main()
