/**
 * `npm run bench:expiry` — does an expiry pass stall ingest? Retention promises PUBACK p99
 * unchanged while a pass runs (docs/operations.md, Retention); this measures it on SQLite.
 *
 * 1. Seeds a DATA_DIR: the service once, to register `--totes` totes (the live load), then
 *    `--days` whole days of past readings written through the SQLite sink's `write()`
 *    (test/bench/lib/reading-load.ts: `--slow-totes` once a minute, two in three bound to
 *    deliveries the store does not hold) and compacted, as a running service keeps past days.
 *    The last seeded day ends `--age-days` days ago.
 * 2. Two runs, each on its own copy of that directory, with the same paced single readings
 *    (`--rate` a second over the totes, for `--ingest-s`):
 *    - `baseline`: retention off (RETENTION_INTERVAL_S=0);
 *    - `expiry`: both retention windows 1 day, so every seeded reading is expired, and the first
 *      pass starting `--pass-at-s` after the service starts, inside the measured window.
 * Prints one JSON object: each run's PUBACK p50 / p99 / max and service CPU per reading, what the
 * expirer removed during the window (from /metrics), the ratio of the p99s and the verdict
 * (within 1.2×, with readings removed during the window). Progress on stderr.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { parseBenchArgs } from './lib/args.js'
import { apiClient } from './lib/ingest-service.js'
import type { ToteCredentials } from './lib/ingest-protocol.js'
import { cpuSeconds, pubackFigures, round } from './lib/ingest-stats.js'
import { forkPublisher } from './lib/publisher-child.js'
import { readingBatches } from './lib/reading-load.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess, type ServiceProcess } from './lib/service-process.js'

const opt = parseBenchArgs(
  'bench:expiry',
  'PUBACK latency of paced single readings with and without an expiry pass running (SQLite). Prints one JSON object on stdout, progress on stderr.',
  {
    totes: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '10000' },
    'ingest-s': { type: 'string', default: '60' },
    'slow-totes': { type: 'string', default: '10000' },
    days: { type: 'string', default: '1' },
    'age-days': { type: 'string', default: '10' },
    'pass-at-s': { type: 'string', default: '8' },
    'keep-data': { type: 'boolean', default: false },
  },
  {
    totes: 'connected totes publishing the live load',
    rate: 'single readings per second over them',
    'ingest-s': 'seconds of the measured phase of each run',
    'slow-totes': 'totes of the seeded history, each reporting once a minute (10,000: 14.4 M readings a day)',
    days: 'whole days of seeded history',
    'age-days': 'how many days ago the last seeded day ended',
    'pass-at-s': 'seconds after the service is ready that the expiry run starts its pass',
    'keep-data': 'keep the temporary directories',
  },
)
const num = (name: keyof typeof opt) => Number(opt[name])
const log = (line: string) => process.stderr.write(`[bench:expiry] ${new Date().toISOString().slice(11, 19)} ${line}\n`)
const DAY_MS = 86_400_000
const WARMUP_MS = 3_000

/** Starts the service on `dataDir` as `npm start` does, with `env` added. */
async function start(dataDir: string, env: NodeJS.ProcessEnv = {}): Promise<ServiceProcess> {
  const port = await freePort()
  return startServiceProcess({ env: benchServiceEnv(dataDir, port, { MQTT_PORT: '0', ...env }), port })
}

/** The seeded directory: `totes` registered, `days` of compacted past readings. */
async function seed(dataDir: string): Promise<{ totes: ToteCredentials[]; readings: number }> {
  const service = await start(dataDir)
  const totes: ToteCredentials[] = []
  try {
    const api = apiClient(service.baseUrl)
    await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const fleet = await api.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
    for (let i = 0; i < num('totes'); i++) {
      const tote = await api.post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
        serial: `expiry-${i}`,
        fleet_id: fleet.id,
      })
      totes.push({ id: tote.id, username: tote.mqtt.username, password: tote.mqtt.password })
    }
  } finally {
    await service.stop()
  }
  log(`${totes.length} totes registered`)

  const lastDayEnd = Math.floor(Date.now() / DAY_MS - num('age-days')) * DAY_MS
  const startMs = lastDayEnd - num('days') * DAY_MS
  const sink = createSqliteSink({ path: join(dataDir, 'readings.db'), compaction: false })
  let readings = 0
  try {
    const t0 = Date.now()
    const load = { slowTotes: num('slow-totes'), fastTotes: 0, startMs, hours: num('days') * 24, batchRows: 20_000, idPrefix: '01jx' }
    for (const batch of readingBatches(load)) {
      await sink.write(batch)
      readings += batch.length
    }
    log(`${readings} readings written (${Math.round(readings / ((Date.now() - t0) / 1_000))}/s)`)
    const t1 = Date.now()
    for (;;) {
      const pass = await sink.compact({ nowMs: Date.now(), maxReadings: 200_000 })
      if (!pass.more) break
    }
    log(`compacted in ${round((Date.now() - t1) / 1_000, 1)} s`)
  } finally {
    await sink.close()
  }
  return { totes, readings }
}

/** The service's Prometheus samples, read once: `name` (labels included, as printed) → value. */
async function metrics(baseUrl: string): Promise<(name: string) => number | null> {
  const lines = (await (await fetch(`${baseUrl}/metrics`)).text()).split('\n')
  return (name) => {
    const line = lines.find((l) => l.startsWith(`${name} `))
    return line ? Number(line.slice(name.length + 1)) : null
  }
}

const REMOVED_READINGS = 'rxtrace_retention_removed_total{table="readings"}'

/** One run on a copy of the seeded directory: the paced phase, measured from outside, and the pass if there was one. */
async function run(name: 'baseline' | 'expiry', seeded: string, totes: ToteCredentials[]) {
  const dataDir = mkdtempSync(join(tmpdir(), `rxtrace-expiry-${name}-`))
  cpSync(seeded, dataDir, { recursive: true })
  const retention =
    name === 'baseline'
      ? { RETENTION_INTERVAL_S: '0' }
      : { RETENTION_INTERVAL_S: opt['pass-at-s'], RETENTION_UNBOUND_DAYS: '1', RETENTION_RECORDS_DAYS: '1' }
  const service = await start(dataDir, retention)
  const { child, ask } = forkPublisher()
  try {
    const url = (await (await fetch(`${service.baseUrl}/.well-known/rxtrace.json`)).json()) as { mqtt: { tcp: string } }
    const connected = await ask(
      { type: 'connect', url: url.mqtt.tcp, totes, subscribeErrors: true, parallel: 50, wire: 'raw' },
      'connected',
    )
    if (connected.failed) throw new Error(`${connected.failed} totes could not connect: ${connected.firstError}`)
    const rate = num('rate')
    await ask({ type: 'run', phase: { name: `${name}-warmup`, durationMs: WARMUP_MS, batch: 1, window: 4, rate } }, 'result')
    const cpu0 = cpuSeconds(service.child.pid!)
    const windowStart = Date.now()
    const removedBefore = (await metrics(service.baseUrl))(REMOVED_READINGS) ?? 0
    const { result } = await ask({ type: 'run', phase: { name, durationMs: num('ingest-s') * 1_000, batch: 1, window: 4, rate } }, 'result')
    const windowEnd = Date.now()
    const cpu1 = cpuSeconds(service.child.pid!)
    const after = await metrics(service.baseUrl)
    const removedInWindow = (after(REMOVED_READINGS) ?? 0) - removedBefore
    const passEnded = after('rxtrace_retention_last_pass_timestamp_seconds')
    const passSeconds = after('rxtrace_retention_pass_duration_seconds')
    await ask({ type: 'disconnect' }, 'disconnected')
    const figures = {
      ...pubackFigures(result),
      service_cpu_us_per_reading:
        cpu0 === null || cpu1 === null || !result.ackedReadings ? null : round(((cpu1 - cpu0) * 1e6) / result.ackedReadings, 1),
      // What the expirer removed while the window ran, and its last complete pass (seconds from the window's start; null: none yet).
      expiry:
        name === 'expiry'
          ? {
              readings_removed_in_window: removedInWindow,
              last_complete_pass: passEnded ? { seconds: passSeconds, ended_s: round((passEnded * 1_000 - windowStart) / 1_000, 1) } : null,
              window_s: round((windowEnd - windowStart) / 1_000, 1),
            }
          : undefined,
    }
    log(`${name}: ${JSON.stringify(figures)}`)
    return figures
  } finally {
    child.kill('SIGTERM')
    await service.stop()
    if (!opt['keep-data']) rmSync(dataDir, { recursive: true, force: true })
  }
}

async function main() {
  const loadBefore = round(loadavg()[0]!, 2)
  const seeded = mkdtempSync(join(tmpdir(), 'rxtrace-expiry-seed-'))
  try {
    const { totes, readings } = await seed(seeded)
    const baseline = await run('baseline', seeded, totes)
    const expiry = await run('expiry', seeded, totes)
    const ratio = baseline.puback_p99_ms ? round(expiry.puback_p99_ms / baseline.puback_p99_ms, 2) : null
    const removing = (expiry.expiry?.readings_removed_in_window ?? 0) > 0
    const report = {
      targets: {
        // "No stall": the p99 with a pass running within 1.2× of the same load without one (and no error).
        puback_p99_unchanged_while_expiry_runs: {
          baseline_p99_ms: baseline.puback_p99_ms,
          expiry_p99_ms: expiry.puback_p99_ms,
          ratio,
          readings_removed_in_window: expiry.expiry?.readings_removed_in_window ?? 0,
          met: removing && ratio !== null && ratio <= 1.2 && expiry.errors === 0 && expiry.behind === 0,
        },
      },
      seeded: { readings, days: num('days'), slow_totes: num('slow-totes'), age_days: num('age-days') },
      baseline,
      expiry,
      machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? null, node: process.version, loadavg_1m_before: loadBefore },
    }
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  } finally {
    if (!opt['keep-data']) rmSync(seeded, { recursive: true, force: true })
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:expiry: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exit(1)
})
