/**
 * `npm run bench:signin` — does signing people in stall the service, and how fast do refresh tokens rotate?
 *
 * The service runs as its own process (`node --import tsx src/main.ts`, SQLite, fresh temporary
 * DATA_DIR, production scrypt cost). Over its public API this script creates a pharmacy, a
 * pharmacist with a password, a first-party public client, and one tote with a dispatched
 * cold-chain delivery. Then:
 *   (a) `--concurrency` browsers sign in over and over (GET /oauth/authorize, POST of the form:
 *       scrypt) for `--signin-seconds`, while /healthz is probed every 20 ms and the tote publishes
 *       `--readings-per-s` QoS 1 readings (mqtt.js); their latencies are the figures;
 *   (b) `--chains` refresh-token chains rotate in parallel (each grant answers with the next
 *       refresh token) for `--refresh-seconds`: grants/s and latency.
 * Each phase reports the service's CPU ms per operation (from /proc). One JSON object on stdout.
 * `--profile` runs the service under `node --cpu-prof` and prints its hotspots to stderr (both
 * phases; give `--signin-seconds 1` to see mostly the refresh grants).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import mqtt from 'mqtt'
import { parseBenchArgs } from './lib/args.js'
import { logServiceProfile } from './lib/cpuprofile.js'
import { apiClient } from './lib/ingest-service.js'
import { LatencySamples, round } from './lib/ingest-stats.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess } from './lib/service-process.js'
import { authorizationCode, REDIRECT } from '../../simulators/pharmacist.js'

const PASSWORD = 'bench password, long enough to pass'
const HEALTHZ_EVERY_MS = 20
const TARGET = { healthzP99Ms: 50, pubackP99Ms: 50, refreshPerS: 1_000, refreshP99Ms: 50 }

const opts = parseBenchArgs(
  'bench:signin',
  'Sign-in (scrypt) under load while /healthz and a QoS 1 reading stream are measured, then refresh-token rotation throughput. Service in its own process (SQLite, fresh temporary DATA_DIR). Prints one JSON object on stdout, progress on stderr.',
  {
    concurrency: { type: 'string', default: '20' },
    'signin-seconds': { type: 'string', default: '20' },
    'readings-per-second': { type: 'string', default: '50' },
    chains: { type: 'string', default: '16' },
    'refresh-seconds': { type: 'string', default: '20' },
    profile: { type: 'boolean', default: false },
  },
  {
    concurrency: 'browsers signing in at once',
    'signin-seconds': 'length of the sign-in phase',
    'readings-per-second': 'QoS 1 readings the tote publishes during sign-ins',
    chains: 'refresh-token chains rotating in parallel',
    'refresh-seconds': 'length of the refresh phase',
    profile: 'run the service under `node --cpu-prof` and print its hotspots to stderr',
  },
)
for (const name of ['concurrency', 'signin-seconds', 'readings-per-second', 'chains', 'refresh-seconds'] as const) {
  if (!(Number(opts[name]) >= 1)) {
    process.stderr.write(`bench:signin: --${name} must be a number ≥ 1\n`)
    process.exit(2)
  }
}
const log = (line: string): void => void process.stderr.write(`bench:signin ${line}\n`)

function summary(samples: LatencySamples) {
  const [p50, p99, max] = samples.percentiles([50, 99, 100])
  return { count: samples.count, p50_ms: round(p50!), p99_ms: round(p99!), max_ms: round(max!) }
}

/** A person signs in on the sign-in page as a browser would (simulators/pharmacist.ts). */
function signIn(baseUrl: string, clientId: string, email: string): Promise<{ code: string; verifier: string }> {
  return authorizationCode(baseUrl, clientId, email, PASSWORD, 'deliveries:read')
}

// The grants go through node:http on kept-alive sockets, not fetch: undici's fetch costs this
// process several times the CPU per request, and on a 2-core machine the load generator's CPU
// is taken from the service it measures.
const keepAlive = new Agent({ keepAlive: true, maxSockets: 64 })

async function token(baseUrl: string, form: Record<string, string>): Promise<{ status: number; body: Record<string, string> }> {
  const body = new URLSearchParams(form).toString()
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}/oauth/token`,
      {
        method: 'POST',
        agent: keepAlive,
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (chunk: Buffer) => chunks.push(chunk))
        res.on('end', () => {
          try {
            resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) as Record<string, string> })
          } catch (error) {
            reject(error as Error)
          }
        })
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
}

async function main(): Promise<void> {
  const loadBefore = round(loadavg()[0]!)
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-'))
  const profileDir = join(dataDir, 'profile')
  const [port, mqttPort] = [await freePort(), await freePort()]
  const env = benchServiceEnv(dataDir, port, { MQTT_PORT: String(mqttPort) })
  log(`starting the service on port ${port} (DATA_DIR ${dataDir})`)
  const service = await startServiceProcess({ env, port, nodeArgs: opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [] })
  const base = service.baseUrl
  let tote: mqtt.MqttClient | null = null
  try {
    const api = apiClient(base)
    await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const pharmacy = await api.post<{ id: string }>('/v1/pharmacies', {
      name: 'Bench Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    await api.post('/v1/users', {
      email: 'pat@bench.example',
      name: 'Pat Pharmacist',
      role: 'pharmacist',
      pharmacy_id: pharmacy.id,
      password: PASSWORD,
    })
    // New clients default to read-only scopes: this one names what it asks for.
    const client = await api.post<{ client_id: string }>('/v1/oauth/clients', {
      client_name: 'Bench Console',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: 'deliveries:read',
    })
    const fleet = await api.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
    const driver = await api.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })
    const t = await api.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
      serial: 'bench-signin-0',
      fleet_id: fleet.id,
    })
    const rx = await api.post<{ delivery_id: string }>(
      '/v1/prescriptions',
      { patient_id: 'pt_bench_1', pharmacy_id: pharmacy.id, cold_chain: true, temperature_profile: 'refrigerated' },
      { 'idempotency-key': 'bench-signin-rx' },
    )
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: driver.id, tote_id: t.id })

    tote = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
      username: t.mqtt.username,
      password: t.mqtt.password,
      clientId: t.mqtt.username,
      clean: true,
      protocolVersion: 4,
      reconnectPeriod: 0,
    })
    const topic = `rxtrace/v1/totes/${t.id}/readings`

    // (a) Sign-ins under load, /healthz and PUBACK measured alongside.
    const concurrency = Number(opts.concurrency)
    const signinMs = Number(opts['signin-seconds']) * 1_000
    const healthz = new LatencySamples()
    const puback = new LatencySamples()
    const signins = new LatencySamples()
    let signinErrors = 0
    let pubErrors = 0
    let healthzErrors = 0
    let lastTs = 0
    let seq = 0
    const cpuA = service.cpuMs()
    const started = performance.now()
    const end = started + signinMs
    const probe = (async () => {
      while (performance.now() < end) {
        const t0 = performance.now()
        const ok = await fetch(`${base}/healthz`).then(
          async (r) => (await r.arrayBuffer(), r.ok),
          () => false,
        )
        if (ok) healthz.add(performance.now() - t0)
        else healthzErrors++
        await new Promise((r) => setTimeout(r, HEALTHZ_EVERY_MS))
      }
    })()
    const everyMs = 1_000 / Number(opts['readings-per-second'])
    const pending: Promise<void>[] = []
    const publisher = (async () => {
      let next = performance.now()
      while (next < end) {
        const ts = (lastTs = Math.max(lastTs + 1, Date.now()))
        const t0 = performance.now()
        pending.push(
          tote!.publishAsync(topic, JSON.stringify({ ts, temp_c: 5 + Math.random(), seq: seq++, battery: 0.9 }), { qos: 1 }).then(
            () => puback.add(performance.now() - t0),
            () => void pubErrors++,
          ),
        )
        next += everyMs
        await new Promise((r) => setTimeout(r, Math.max(0, next - performance.now())))
      }
    })()
    log(
      `(a) ${concurrency} concurrent sign-ins for ${signinMs / 1_000} s, /healthz every ${HEALTHZ_EVERY_MS} ms, ${opts['readings-per-second']} QoS 1 readings/s`,
    )
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now()
          try {
            await signIn(base, client.client_id, 'pat@bench.example')
            signins.add(performance.now() - t0)
          } catch (error) {
            if (signinErrors++ === 0) log(`first sign-in error: ${(error as Error).message}`)
          }
        }
      }),
    )
    await Promise.all([probe, publisher])
    await Promise.all(pending)
    const secondsA = (performance.now() - started) / 1_000
    const cpuAfterA = service.cpuMs()
    const signIns = summary(signins)
    const phaseA = {
      seconds: round(secondsA),
      concurrency,
      sign_ins: {
        ...signIns,
        per_s: round(signIns.count / secondsA),
        errors: signinErrors,
        service_cpu_ms_per_sign_in:
          cpuA === null || cpuAfterA === null || !signIns.count ? null : round((cpuAfterA - cpuA) / signIns.count),
      },
      healthz: { ...summary(healthz), errors: healthzErrors },
      puback: { ...summary(puback), errors: pubErrors, readings_per_s: Number(opts['readings-per-second']) },
    }
    log(`(a) ${JSON.stringify(phaseA)}`)

    // (b) Refresh-token rotation: K chains, each grant's answer feeds the next.
    const chains = Number(opts.chains)
    const refreshMs = Number(opts['refresh-seconds']) * 1_000
    const heads: string[] = []
    for (let i = 0; i < chains; i++) {
      const { code, verifier } = await signIn(base, client.client_id, 'pat@bench.example')
      const exchanged = await token(base, {
        grant_type: 'authorization_code',
        code,
        redirect_uri: REDIRECT,
        code_verifier: verifier,
        client_id: client.client_id,
      })
      if (exchanged.status !== 200) throw new Error(`code exchange: ${exchanged.status} ${JSON.stringify(exchanged.body)}`)
      heads.push(exchanged.body.refresh_token!)
    }
    log(`(b) ${chains} refresh-token chains rotating for ${refreshMs / 1_000} s`)
    const grants = new LatencySamples()
    let refreshErrors = 0
    const cpuB = service.cpuMs()
    const ownCpuB = process.cpuUsage()
    const startedB = performance.now()
    const endB = startedB + refreshMs
    await Promise.all(
      heads.map(async (head) => {
        let current = head
        while (performance.now() < endB) {
          const t0 = performance.now()
          const res = await token(base, { grant_type: 'refresh_token', refresh_token: current, client_id: client.client_id })
          if (res.status !== 200) {
            if (refreshErrors++ === 0) log(`first refresh error: ${res.status} ${JSON.stringify(res.body)}`)
            return // the chain is broken (a rotated token cannot be retried)
          }
          grants.add(performance.now() - t0)
          current = res.body.refresh_token!
        }
      }),
    )
    const secondsB = (performance.now() - startedB) / 1_000
    const cpuAfterB = service.cpuMs()
    const ownCpu = process.cpuUsage(ownCpuB)
    const g = summary(grants)
    const phaseB = {
      seconds: round(secondsB),
      chains,
      ...g,
      grants_per_s: round(g.count / secondsB),
      errors: refreshErrors,
      service_cpu_ms_per_grant: cpuB === null || cpuAfterB === null || !g.count ? null : round((cpuAfterB - cpuB) / g.count, 2),
      // The load generator's own CPU: on a 2-core machine it is taken from the service.
      bench_cpu_ms_per_grant: g.count ? round((ownCpu.user + ownCpu.system) / 1_000 / g.count, 2) : null,
    }
    log(`(b) ${JSON.stringify(phaseB)}`)

    await tote.endAsync()
    tote = null
    const code = await service.stop()
    if (code !== 0) log(`warning: the service exited with code ${code} after SIGTERM`)
    if (opts.profile) logServiceProfile(profileDir, log, 30)
    process.stdout.write(
      JSON.stringify(
        {
          sign_in_under_load: phaseA,
          refresh_rotation: phaseB,
          targets: {
            healthz_p99_under_50_ms_during_sign_ins: { ms: phaseA.healthz.p99_ms, met: phaseA.healthz.p99_ms < TARGET.healthzP99Ms },
            puback_p99_under_50_ms_during_sign_ins: {
              ms: phaseA.puback.p99_ms,
              met: phaseA.puback.p99_ms < TARGET.pubackP99Ms && pubErrors === 0,
            },
            refresh_grants_at_least_1000_per_s: {
              per_s: phaseB.grants_per_s,
              met: phaseB.grants_per_s >= TARGET.refreshPerS && refreshErrors === 0,
            },
            refresh_p99_under_50_ms: { ms: phaseB.p99_ms, met: phaseB.p99_ms < TARGET.refreshP99Ms },
          },
          machine: {
            cpus: cpus().length,
            cpu_model: cpus()[0]?.model ?? 'unknown',
            node: process.version,
            loadavg_1m_before: loadBefore,
            loadavg_1m_after: round(loadavg()[0]!),
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
    await tote?.endAsync(true).catch(() => {})
    keepAlive.destroy()
    if (service.child.exitCode === null) await service.stop()
    if (!opts.profile) rmSync(dataDir, { recursive: true, force: true })
  }
}

await main()
