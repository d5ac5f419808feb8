/**
 * `npm run bench:signature` — how long does a pharmacist wait for a signed disposition while
 * other people sign in?
 *
 * The service runs as its own process (`node --import tsx src/main.ts`, SQLite, fresh temporary
 * DATA_DIR, production scrypt cost). Over its public API this script registers a pharmacy, a
 * fleet, `--dispositions` cold-chain deliveries picked up with a tote each, breaks each cold
 * chain with one frozen reading over MQTT (mqtt.js), and signs a pharmacist in through the
 * sign-in page. Then `--concurrency` browsers sign in over and over (scrypt on the service's
 * hashing thread) while the pharmacist records one signed disposition after another, each with
 * the password entered again (a second scrypt, off the event loop). One JSON object on stdout:
 * the dispositions' latencies (the target: p99 < 500 ms), the sign-ins', and the load average.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import mqtt from 'mqtt'
import { ApiClient } from '../../simulators/api-client.js'
import { Pharmacist, REDIRECT, signIn } from '../../simulators/pharmacist.js'
import { parseBenchArgs } from './lib/args.js'
import { LatencySamples, round } from './lib/ingest-stats.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess } from './lib/service-process.js'

const TARGET_P99_MS = 500
const LOAD_PASSWORD = 'bench password, long enough to pass'
// Sign-ins get this long to fill the hashing queue before the first disposition is timed.
const WARM_UP_MS = 2_000

const opts = parseBenchArgs(
  'bench:signature',
  'Signed dispositions (password re-checked with scrypt) timed while other people sign in. Service in its own process (SQLite, fresh temporary DATA_DIR). Prints one JSON object on stdout, progress on stderr.',
  {
    dispositions: { type: 'string', default: '40' },
    concurrency: { type: 'string', default: '20' },
  },
  { dispositions: 'signed dispositions timed, one after another', concurrency: 'browsers signing in at once meanwhile' },
)
const log = (line: string): void => void process.stderr.write(`bench:signature ${line}\n`)

function summary(samples: LatencySamples) {
  const [p50, p99, max] = samples.percentiles([50, 99, 100])
  return { count: samples.count, p50_ms: round(p50!), p99_ms: round(p99!), max_ms: round(max!) }
}

async function main(): Promise<void> {
  const loadBefore = round(loadavg()[0]!)
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-'))
  const [port, mqttPort] = [await freePort(), await freePort()]
  const service = await startServiceProcess({ env: benchServiceEnv(dataDir, port, { MQTT_PORT: String(mqttPort) }), port })
  const base = service.baseUrl
  try {
    const admin = new ApiClient(base, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const pharmacy = await admin.post<{ id: string }>('/v1/pharmacies', {
      name: 'Bench Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    const fleet = await admin.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
    const driver = await admin.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })

    const count = Number(opts.dispositions)
    log(`breaking ${count} cold chains (a frozen reading each, over MQTT)`)
    const deliveries: string[] = []
    for (let i = 0; i < count; i++) {
      const tote = await admin.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
        serial: `bench-signature-${i}`,
        pharmacy_id: pharmacy.id,
      })
      const rx = await admin.post<{ delivery_id: string }>('/v1/prescriptions', {
        patient_id: `pt_bench_${i}`,
        pharmacy_id: pharmacy.id,
        cold_chain: true,
        temperature_profile: 'refrigerated',
      })
      await admin.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: driver.id, tote_id: tote.id })
      await admin.post(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: pharmacy.id, to: driver.id, signature: 'bench' })
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
        username: tote.mqtt.username,
        password: tote.mqtt.password,
        clientId: tote.mqtt.username,
        protocolVersion: 4,
        reconnectPeriod: 0,
      })
      await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts: Date.now(), temp_c: -3 }), { qos: 1 })
      await client.endAsync()
      deliveries.push(rx.delivery_id)
    }
    for (let broken = 0; broken < count;) {
      await sleep(250)
      const page = await admin.get<{ data: unknown[] }>(`/v1/deliveries?cold_chain_state=BROKEN&limit=${count}`)
      broken = page.data.length
    }

    const pharmacist = await Pharmacist.register(admin, pharmacy.id)
    await admin.post('/v1/users', {
      email: 'load@bench.example',
      name: 'Load Tester',
      role: 'technician',
      pharmacy_id: pharmacy.id,
      password: LOAD_PASSWORD,
    })
    const loadApp = await admin.post<{ client_id: string }>('/v1/oauth/clients', {
      client_name: 'Bench sign-in load',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: 'deliveries:read',
    })

    const concurrency = Number(opts.concurrency)
    log(`${concurrency} concurrent sign-ins; ${count} signed dispositions after ${WARM_UP_MS} ms`)
    const signIns = new LatencySamples()
    const signed = new LatencySamples()
    let signInErrors = 0
    let stop = false
    const cpu0 = service.cpuMs()
    const started = performance.now()
    const load = Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (!stop) {
          const t0 = performance.now()
          try {
            await signIn(base, loadApp.client_id, 'load@bench.example', LOAD_PASSWORD)
            signIns.add(performance.now() - t0)
          } catch (error) {
            if (signInErrors++ === 0) log(`first sign-in error: ${(error as Error).message}`)
          }
        }
      }),
    )
    await sleep(WARM_UP_MS)
    for (const id of deliveries) {
      const t0 = performance.now()
      await pharmacist.disposition(id, 'return', 'Frozen in transit: destroy and re-dispense.')
      signed.add(performance.now() - t0)
    }
    stop = true
    await load
    const seconds = (performance.now() - started) / 1_000
    const cpu1 = service.cpuMs()
    const dispositions = summary(signed)
    const result = {
      benchmark: 'bench:signature',
      cpus: cpus().length,
      load_average_1m: { before: loadBefore, after: round(loadavg()[0]!) },
      seconds: round(seconds),
      signed_dispositions: { ...dispositions, target_p99_ms: TARGET_P99_MS, meets_target: dispositions.p99_ms < TARGET_P99_MS },
      concurrent_sign_ins: { concurrency, ...summary(signIns), per_s: round(signIns.count / seconds), errors: signInErrors },
      service_cpu_ms: cpu0 === null || cpu1 === null ? null : round(cpu1 - cpu0),
    }
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  } finally {
    await service.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:signature failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
