/**
 * `npm run bench:expiry` — does an expiry pass stall ingest? Retention promises PUBACK p99
 * unchanged while a pass runs (docs/operations.md, Retention); this measures it on SQLite
 * (`--engine sqlite`, the default) or PostgreSQL (`--engine postgres`, `--database-url`).
 *
 * 1. Seeds a store: the service once, to register `--totes` totes (the live load), then
 *    `--days` whole days of past readings written through the engine's sink `write()`
 *    (test/bench/lib/reading-load.ts: `--slow-totes` once a minute, two in three bound to
 *    deliveries the store does not hold), on SQLite compacted, as a running service keeps past
 *    days. The last seeded day ends `--age-days` days ago.
 * 2. Two runs, each on its own store (SQLite: a copy of the seeded directory; PostgreSQL: a
 *    schema seeded the same way for each run, as a schema has no cheap copy), with the same paced
 *    single readings (`--rate` a second over the totes, for `--ingest-s`):
 *    - `baseline`: retention off (RETENTION_INTERVAL_S=0);
 *    - `expiry`: both retention windows 1 day, so every seeded reading is expired (with
 *      `--unbound-only` only the unbound window: bound readings stay, as they do for the first
 *      years of a service's life, and only the unbound ones are removed, chunk by chunk), and the first
 *      pass starting `--pass-at-s` after the service starts, inside the measured window.
 * Prints one JSON object: each run's PUBACK p50 / p99 / max and service CPU per reading, what the
 * expirer removed during the window (from /metrics), the ratio of the p99s and the verdict
 * (within 1.2×, with readings removed during the window). Progress on stderr.
 *
 * `--mode sink` (SQLite) runs the two runs against the readings sink alone, in this process
 * (runSink): the store's own part of a stall, without a broker or a publisher beside it.
 */
import { randomBytes } from 'node:crypto'
import { cpSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ingestGatherMs, loadConfig } from '../../src/config.js'
import { createPostgresSink } from '../../src/timeseries/postgres-sink.js'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { postgresSchemas } from '../helpers/stores.js'
import { parseBenchArgs } from './lib/args.js'
import { apiClient } from './lib/ingest-service.js'
import type { ToteCredentials } from './lib/ingest-protocol.js'
import { cpuSeconds, LatencySamples, percentile, pubackFigures, round } from './lib/ingest-stats.js'
import { forkPublisher } from './lib/publisher-child.js'
import { readingBatches } from './lib/reading-load.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess, type ServiceProcess } from './lib/service-process.js'

const opt = parseBenchArgs(
  'bench:expiry',
  'PUBACK latency of paced single readings with and without an expiry pass running (SQLite or PostgreSQL). Prints one JSON object on stdout, progress on stderr.',
  {
    engine: { type: 'string', default: 'sqlite' },
    mode: { type: 'string', default: 'service' },
    seeded: { type: 'string', default: '' },
    'database-url': { type: 'string', default: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
    totes: { type: 'string', default: '1000' },
    rate: { type: 'string', default: '10000' },
    'ingest-s': { type: 'string', default: '60' },
    'slow-totes': { type: 'string', default: '10000' },
    days: { type: 'string', default: '1' },
    'age-days': { type: 'string', default: '10' },
    'pass-at-s': { type: 'string', default: '8' },
    'retention-batch': { type: 'string', default: '' },
    'retention-pause-ms': { type: 'string', default: '' },
    'keep-data': { type: 'boolean', default: false },
    'unbound-only': { type: 'boolean', default: false },
  },
  {
    engine: 'sqlite (the embedded default) or postgres (entities and readings in a fresh schema of --database-url per run)',
    mode: "service (the service over MQTT) or sink (SQLite only: the readings sink in this process, paced writes as the group committer makes them, and the expirer's batches; what the store alone does)",
    'database-url': 'the PostgreSQL server of --engine postgres',
    totes: 'connected totes publishing the live load',
    rate: 'single readings per second over them',
    'ingest-s': 'seconds of the measured phase of each run',
    'slow-totes': 'totes of the seeded history, each reporting once a minute (10,000: 14.4 M readings a day)',
    days: 'whole days of seeded history',
    'age-days': 'how many days ago the last seeded day ended',
    'pass-at-s': 'seconds after the service is ready that the expiry run starts its pass',
    'retention-batch': "RETENTION_BATCH of the expiry run (default: the service's)",
    'retention-pause-ms': "RETENTION_PAUSE_MS of the expiry run (default: the service's)",
    'keep-data': 'keep the temporary directories',
    'unbound-only': "the expiry run removes unbound readings only (the records window at the service's default, 6 years)",
    seeded:
      'with --mode sink: a DATA_DIR seeded before (the baseline directory --keep-data leaves), copied for each run instead of seeding',
  },
)
const num = (name: keyof typeof opt) => Number(opt[name])
const ENGINE = opt.engine
if (ENGINE !== 'sqlite' && ENGINE !== 'postgres') throw new Error(`--engine must be sqlite or postgres, got ${ENGINE}`)
const MODE = opt.mode
if (MODE !== 'service' && MODE !== 'sink') throw new Error(`--mode must be service or sink, got ${MODE}`)
if (MODE === 'sink' && ENGINE !== 'sqlite') throw new Error('--mode sink measures the SQLite sink: use it with --engine sqlite')
if (opt.seeded && MODE !== 'sink') throw new Error('--seeded needs --mode sink (the service mode needs the seed run’s tote credentials)')
const log = (line: string) => process.stderr.write(`[bench:expiry] ${new Date().toISOString().slice(11, 19)} ${line}\n`)
const DAY_MS = 86_400_000
const WARMUP_MS = 3_000

/**
 * Where one run's data lives: a DATA_DIR and, on PostgreSQL, a schema of its own (entities and
 * readings; the service needs a key-encryption key there).
 */
type Store = { dataDir: string; schema: string | null; env: NodeJS.ProcessEnv }

/** PostgreSQL: each run's schema, migrated when made (test/helpers/stores.ts) and dropped at the end. */
const schemas = ENGINE === 'postgres' ? postgresSchemas(opt['database-url']) : null

async function newStore(name: string): Promise<Store> {
  const dataDir = mkdtempSync(join(tmpdir(), `rxtrace-expiry-${name}-`))
  if (!schemas) return { dataDir, schema: null, env: {} }
  const schema = await schemas.create()
  const url = `${opt['database-url']}?options=${encodeURIComponent(`-c search_path=${schema}`)}`
  return { dataDir, schema, env: { DATABASE_URL: url, SECRETS_KEY: randomBytes(32).toString('base64') } }
}

function removeStore(store: Store): void {
  if (!opt['keep-data']) rmSync(store.dataDir, { recursive: true, force: true })
}

/** Starts the service on `store` as `npm start` does, with `env` added. */
async function start(store: Store, env: NodeJS.ProcessEnv = {}): Promise<ServiceProcess> {
  const port = await freePort()
  return startServiceProcess({ env: benchServiceEnv(store.dataDir, port, { MQTT_PORT: '0', ...store.env, ...env }), port })
}

/** The seeded store: `totes` registered, `days` of past readings (compacted on SQLite). */
async function seed(store: Store): Promise<{ totes: ToteCredentials[]; readings: number }> {
  const service = await start(store)
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
  // The engine's sink over the store's readings, as the service opens it; SQLite's compacts past days.
  const sqlite = store.schema ? null : createSqliteSink({ path: join(store.dataDir, 'readings.db'), compaction: false })
  const sink: ReadingSink = sqlite ?? createPostgresSink({ url: opt['database-url'], schema: store.schema! })
  let readings = 0
  try {
    const t0 = Date.now()
    const load = { slowTotes: num('slow-totes'), fastTotes: 0, startMs, hours: num('days') * 24, batchRows: 20_000, idPrefix: '01jx' }
    for (const batch of readingBatches(load)) {
      await sink.write(batch)
      readings += batch.length
    }
    log(`${readings} readings written (${Math.round(readings / ((Date.now() - t0) / 1_000))}/s)`)
    if (sqlite) {
      const t1 = Date.now()
      for (let more = true; more;) more = (await sqlite.compact({ nowMs: Date.now(), maxReadings: 200_000 })).more
      log(`compacted in ${round((Date.now() - t1) / 1_000, 1)} s`)
    }
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

/** One run on its own seeded store: the paced phase, measured from outside, and the pass if there was one. */
async function run(name: 'baseline' | 'expiry', store: Store, totes: ToteCredentials[]) {
  const retention =
    name === 'baseline'
      ? { RETENTION_INTERVAL_S: '0' }
      : {
          RETENTION_INTERVAL_S: opt['pass-at-s'],
          RETENTION_UNBOUND_DAYS: '1',
          ...(opt['unbound-only'] ? {} : { RETENTION_RECORDS_DAYS: '1' }),
          ...(opt['retention-batch'] ? { RETENTION_BATCH: opt['retention-batch'] } : {}),
          ...(opt['retention-pause-ms'] ? { RETENTION_PAUSE_MS: opt['retention-pause-ms'] } : {}),
        }
  const service = await start(store, retention)
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
    removeStore(store)
  }
}

/**
 * `--mode sink`: the same two runs against the SQLite sink alone, in this process: every
 * INGEST_GATHER_MS (the embedded broker's) one `write()` of that many ms of readings over
 * `--totes` live totes (as the group committer makes them), each timed from when it was due to when it committed (what a
 * PUBACK waits for); in the `expiry` run, `expire()` batches as the expirer calls them (no kept
 * delivery, both cut-offs a day ago), the first `--pass-at-s` after the start. No broker, no
 * publisher: what the store does, with its WAL checkpointer, beside a pass.
 */
async function runSink(name: 'baseline' | 'expiry', store: Store) {
  const file = join(store.dataDir, 'readings.db')
  const sink = createSqliteSink({ path: file, compaction: false })
  // The service's own settings: its defaults, or the --retention-* options, validated as it would.
  const config = loadConfig({ RETENTION_BATCH: opt['retention-batch'], RETENTION_PAUSE_MS: opt['retention-pause-ms'] })
  const gatherMs = ingestGatherMs(config)
  const perWrite = Math.max(1, Math.round((num('rate') * gatherMs) / 1_000))
  const liveTotes = Array.from({ length: num('totes') }, (_, i) => `tt_live${String(i).padStart(22, '0')}`)
  const latencies = new LatencySamples()
  let written = 0
  let stopped = false
  let walMaxBytes = 0
  const started = performance.now()
  const measureFrom = started + WARMUP_MS
  const ingest = async () => {
    let due = performance.now()
    while (!stopped) {
      due += gatherMs
      if (due > performance.now()) await sleep(due - performance.now())
      const now = Date.now()
      const rows = Array.from({ length: perWrite }, (): ReadingRow => {
        const seq = written++
        return { ...LIVE_READING, tote_id: liveTotes[seq % liveTotes.length]!, ts: now, seq, received_at: now }
      })
      await sink.write(rows)
      if (due >= measureFrom) latencies.add(Math.max(0, performance.now() - due)) // a timer may fire a little early
    }
  }
  const pass = { batches: 0, deferred: 0, removed: 0, batch_ms: [] as number[] }
  const expiring = async () => {
    await sleep(num('pass-at-s') * 1_000)
    for (let more = true; more && !stopped;) {
      const t0 = performance.now()
      const result = await sink.expire!({
        unboundBeforeMs: Date.now() - DAY_MS,
        boundBeforeMs: Date.now() - (opt['unbound-only'] ? config.RETENTION_RECORDS_DAYS : 1) * DAY_MS,
        keepDeliveries: new Set(),
        limit: config.RETENTION_BATCH,
      })
      pass.batch_ms.push(performance.now() - t0)
      pass.batches++
      pass.removed += result.removed
      if (result.deferred) pass.deferred++
      more = result.more
      await sleep(config.RETENTION_PAUSE_MS)
    }
  }
  const walWatch = setInterval(() => (walMaxBytes = Math.max(walMaxBytes, statSync(`${file}-wal`).size)), 250)
  const cpu0 = process.cpuUsage()
  const jobs = [ingest(), name === 'expiry' ? expiring() : Promise.resolve()]
  await sleep(WARMUP_MS + num('ingest-s') * 1_000)
  stopped = true
  await Promise.all(jobs)
  const cpu = process.cpuUsage(cpu0)
  clearInterval(walWatch)
  await sink.close()
  removeStore(store)
  const [p50, p99, max] = latencies.percentiles([50, 99, 100])
  const figures = {
    readings_per_s: round(written / ((performance.now() - started) / 1_000), 0),
    commit_p50_ms: round(p50!, 2),
    commit_p99_ms: round(p99!, 2),
    commit_max_ms: round(max!, 1),
    // This process: the writes, the pass and the WAL checkpointer's thread.
    cpu_us_per_reading: round((cpu.user + cpu.system) / written, 1),
    wal_max_mib: round(walMaxBytes / 1_048_576, 0),
    expiry: name === 'expiry' ? passFigures(pass) : undefined,
  }
  log(`${name}: ${JSON.stringify(figures)}`)
  return figures
}

/** An expiry run's pass as reported: its counts, and its batches' times as p50 and max. */
function passFigures({ batch_ms, ...counts }: { batches: number; deferred: number; removed: number; batch_ms: number[] }) {
  return {
    ...counts,
    batch_p50_ms: batch_ms.length ? round(percentile(batch_ms, 50), 1) : null,
    batch_max_ms: batch_ms.length ? round(Math.max(...batch_ms), 1) : null,
  }
}

/** What every live reading of `--mode sink` holds besides its tote, time and sequence. */
const LIVE_READING = { delivery_id: null, rx_id: null, temp_c: 4.2, battery: 0.9, humidity: null, lat: null, lng: null, late: false }

/** Readings in a seeded SQLite store, counted as its sink counts them. */
async function countReadings(dir: string): Promise<number> {
  const sink = createSqliteSink({ path: join(dir, 'readings.db'), compaction: false })
  try {
    return await sink.count()
  } finally {
    await sink.close()
  }
}

/**
 * Each run's store, seeded: on SQLite one seed copied for each run (a copy costs seconds, a seed
 * minutes); on PostgreSQL a schema seeded for each run.
 */
async function seededStores(): Promise<{
  stores: Record<'baseline' | 'expiry', Store>
  totes: Record<'baseline' | 'expiry', ToteCredentials[]>
  readings: number
}> {
  if (ENGINE === 'postgres') {
    const baseline = await newStore('baseline')
    const expiry = await newStore('expiry')
    const a = await seed(baseline)
    const b = await seed(expiry)
    return { stores: { baseline, expiry }, totes: { baseline: a.totes, expiry: b.totes }, readings: a.readings }
  }
  const copyOf = async (dir: string, name: string) => {
    const store = await newStore(name)
    cpSync(dir, store.dataDir, { recursive: true })
    return store
  }
  if (opt.seeded) {
    // An earlier seed, for --mode sink (which needs no tote's credentials): each run gets a copy.
    const stores = { baseline: await copyOf(opt.seeded, 'baseline'), expiry: await copyOf(opt.seeded, 'expiry') }
    const readings = await countReadings(stores.baseline.dataDir)
    log(`${readings} readings in ${opt.seeded}`)
    return { stores, totes: { baseline: [], expiry: [] }, readings }
  }
  const seeded = await newStore('seed')
  try {
    const { totes, readings } = await seed(seeded)
    const copy = (name: string) => copyOf(seeded.dataDir, name)
    return {
      stores: { baseline: await copy('baseline'), expiry: await copy('expiry') },
      totes: { baseline: totes, expiry: totes },
      readings,
    }
  } finally {
    rmSync(seeded.dataDir, { recursive: true, force: true })
  }
}

async function main() {
  const loadBefore = round(loadavg()[0]!, 2)
  try {
    const { stores, totes, readings } = await seededStores()
    // With --seeded the seed's own shape is whatever made that directory.
    const seeded = opt.seeded
      ? { readings, from: opt.seeded }
      : { readings, days: num('days'), slow_totes: num('slow-totes'), age_days: num('age-days') }
    const machine = { cpus: cpus().length, cpu_model: cpus()[0]?.model ?? null, node: process.version, loadavg_1m_before: loadBefore }
    const print = (report: object) => process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
    if (MODE === 'sink') {
      const baseline = await runSink('baseline', stores.baseline)
      const expiry = await runSink('expiry', stores.expiry)
      const ratio = round(expiry.commit_p99_ms / baseline.commit_p99_ms, 2)
      const report = {
        targets: {
          commit_p99_unchanged_while_expiry_runs: {
            baseline_p99_ms: baseline.commit_p99_ms,
            expiry_p99_ms: expiry.commit_p99_ms,
            ratio,
            readings_removed: expiry.expiry?.removed ?? 0,
            met: (expiry.expiry?.removed ?? 0) > 0 && ratio <= 1.2,
          },
        },
        engine: ENGINE,
        mode: MODE,
        seeded,
        baseline,
        expiry,
        machine,
      }
      print(report)
      return
    }
    const baseline = await run('baseline', stores.baseline, totes.baseline)
    const expiry = await run('expiry', stores.expiry, totes.expiry)
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
      engine: ENGINE,
      seeded,
      baseline,
      expiry,
      machine,
    }
    print(report)
  } finally {
    // Each run removed its directory; the schemas go here, a failed seed's included.
    if (!opt['keep-data']) await schemas?.drop()
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:expiry: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exit(1)
})
