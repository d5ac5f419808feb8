/**
 * `npm run bench:ingest`: how fast the real service ingests tote readings over MQTT, against the
 * ceiling of a bare Aedes broker on the same machine with the same publisher.
 *
 * 1. The service runs as a child process (`node <npm start's node flags> --import tsx src/main.ts`) on SQLite in a fresh
 *    DATA_DIR with REORDER_WINDOW_S=0; totes, cold-chain prescriptions and dispatches are created
 *    over HTTP, so readings are bound and judged by the rule engine.
 * 2. A second child (test/bench/lib/ingest-publisher.ts) connects the totes with their own credentials
 *    (mqtt.js, MQTT 3.1.1, QoS 1, clean session) and runs the phases; it measures publish → PUBACK.
 * 3. Some bound totes publish −2 °C (below the refrigerated profile's hard_min_c 0 °C): an
 *    immediate `cold-chain.break`. Reading → event latency is the event's `created_at` in the
 *    outbox minus the publish time (same machine, same clock).
 * 4. A bare Aedes broker (test/bench/lib/ingest-ceiling-broker.ts) with the same publisher gives the ceiling.
 * 5. RSS from /proc/<pid>/status; 5,000 connected totes in a phase of its own (first, on a fresh process).
 * 6. After a graceful stop, every PUBACKed reading must be in readings.db.
 *
 * 8. `--mode hard-limit` (test/bench/lib/ingest-hard-limit.ts): reading → `cold-chain.break` for a reading past a
 *    hard limit with the shipped reorder window (REORDER_WINDOW_S=30): judged on arrival, target p99 < 1 s.
 *
 * 7. The main runs are paced at the issue's target rates (20,000 single readings/s for 30 s; 1,000
 *    batches of 100/s for 20 s); rate ladders before them find the highest paced rate that still
 *    keeps PUBACK p99 under 50 ms (headroom). `targets` in the output gives each target's verdict.
 *
 * Prints one JSON object on stdout; progress on stderr. Options: node's parseArgs, see `options`.
 */
import { openReadingsReadOnly } from '../../src/timeseries/sqlite-readings-reader.js'
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import Database from 'better-sqlite3'
import pg from 'pg'
import type { Phase, PhaseResult, ToteCredentials } from './lib/ingest-protocol.js'
import { formatSummary, summarize } from './lib/cpuprofile.js'
import { formatHeapSummary } from './lib/heapprofile.js'
import { connectProfiler, inspectorUrlFrom } from './lib/ingest-profiler.js'
import { createFixture, freePort, repoRoot, startService } from './lib/ingest-service.js'
import { BENCH_ADMIN, benchServiceEnv } from './lib/service-process.js'
import { cpuSeconds, percentile, round, rssMb, watchRss } from './lib/ingest-stats.js'
import { parseBenchArgs } from './lib/args.js'
import { forkPublisher } from './lib/publisher-child.js'
import { runExternalComparison } from './lib/ingest-external.js'
import { hardLimitLatency } from './lib/ingest-hard-limit.js'
import { QUESTDB_TARGET, questdbReport, startQuestdbStandin, type PhaseFigures } from './lib/questdb-bench.js'
import { listenerPid, localQuestdbPort } from './lib/listener-pid.js'
import { createQuestdbSink } from '../../src/timeseries/questdb-sink.js'

const opt = parseBenchArgs(
  'bench:ingest',
  "MQTT ingest throughput and PUBACK latency of the service, against a bare Aedes broker's ceiling. Prints one JSON object on stdout, progress on stderr.",
  {
    totes: { type: 'string', default: '1000' },
    /** Connected totes reporting once a second, in phases of their own on a fresh process; a comma-separated list runs each in turn (e.g. 5000,20000). */
    'many-totes': { type: 'string', default: '5000' },
    'single-s': { type: 'string', default: '30' },
    'batch-s': { type: 'string', default: '20' },
    'ceiling-s': { type: 'string', default: '20' },
    'many-s': { type: 'string', default: '10' },
    /** How the publisher sends: `raw` PUBLISH packets on mqtt.js connections, or `mqttjs` client.publish (see ingest-publisher.ts). */
    wire: { type: 'string', default: 'raw' },
    /** Publishes each tote keeps in flight in the closed-loop (capacity) runs. */
    window: { type: 'string', default: '8' },
    /** Publishes/s for the single-reading phase; default: the issue's target, 20,000 (10,000 with --sink questdb-standin). */
    rate: { type: 'string', default: '20000' },
    /** Publishes/s (of 100 readings) for the batch phase; default: the issue's target, 1,000 (100,000 readings/s; 500 with --sink questdb-standin). */
    'batch-rate': { type: 'string', default: '1000' },
    /** Skip the rate ladders (the highest paced rates with PUBACK p99 under --p99-ms: headroom over the targets). */
    'skip-ladder': { type: 'boolean', default: false },
    /** PUBACK p99 a sustainable rate must keep, ms. */
    'p99-ms': { type: 'string', default: '50' },
    breaks: { type: 'string', default: '250' },
    /** Every cold-chain delivery carries 3 items judged by products of 6 bands each; the break readings (30 °C, above every band) exhaust them: reason stability_exhausted. */
    products: { type: 'boolean', default: false },
    /** Comma-separated phase names (e.g. single-probe,single,batch100; with --mode external: embedded, external-1-worker, external-2-workers): CPU-profile the service during them, hotspots on stderr. */
    'cpu-prof': { type: 'string', default: '' },
    /** Comma-separated phase names: sampling heap profile of the service during them (bytes allocated per reading, by function), on stderr. */
    'heap-prof': { type: 'string', default: '' },
    'skip-ceiling': { type: 'boolean', default: false },
    'skip-many': { type: 'boolean', default: false },
    /** Measure the bare-Aedes ceiling only (quick reference runs). */
    'only-ceiling': { type: 'boolean', default: false },
    'keep-data': { type: 'boolean', default: false },
    /**
     * `embedded` (the phases above), `external`: Mosquitto with 1 and 2 ingest workers next to the embedded broker
     * (test/bench/lib/ingest-external.ts), or `hard-limit`: reading → break of a hard-limit reading with the 30 s reorder window.
     */
    mode: { type: 'string', default: 'embedded' },
    /** External mode: which of embedded, external-1-worker, external-2-workers to run (comma-separated; default all). */
    'external-modes': { type: 'string', default: '' },
    /** External mode: seconds of the paced single-reading phase in each mode. */
    'external-s': { type: 'string', default: '20' },
    /** External mode: the PostgreSQL server the copies share (each mode gets a role and schema of its own). */
    'database-url': { type: 'string', default: process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test' },
    /**
     * Where readings go: `sqlite` (the embedded default), `postgres` (DATABASE_URL without
     * QUESTDB_CONFIG: entities and readings in a fresh schema of --database-url), or
     * `questdb-standin` (QUESTDB_CONFIG pointing at test/bench/lib/questdb-standin.ts, which answers
     * each write after --questdb-delay-ms; the report's `questdb` holds both QuestDB targets), or
     * `questdb`: the QuestDB that this shell's QUESTDB_CONFIG names (passed through to the service;
     * entities stay in SQLite), with the same targets.
     */
    sink: { type: 'string', default: 'sqlite' },
    'questdb-delay-ms': { type: 'string', default: '20' },
    /** --sink questdb: the QuestDB process whose CPU is measured; default: whoever listens on QUESTDB_CONFIG's local HTTP port. */
    'questdb-pid': { type: 'string', default: '' },
    /** Hard-limit mode: seconds over which the totes' freeze readings are spread, and the reorder window. */
    'hard-limit-s': { type: 'string', default: '30' },
    'hard-limit-window-s': { type: 'string', default: '30' },
  },
)
const SINK = opt.sink
if (!['sqlite', 'postgres', 'questdb-standin', 'questdb'].includes(SINK))
  throw new Error(`--sink must be sqlite, postgres, questdb-standin or questdb, got ${SINK}`)
if (SINK === 'questdb' && !process.env.QUESTDB_CONFIG)
  throw new Error('--sink questdb needs QUESTDB_CONFIG (e.g. http::addr=127.0.0.1:9000;)')
// The issue's targets on a 2-core machine.
const TARGET = { singlePerS: 20_000, batchPerS: 100_000, pubackP99Ms: 50, eventP99Ms: 100, pipelineVsCeiling: 0.85, rss5000Mb: 500 }
// Issue 28: 20,000 totes at a reading a second each, PUBACK p99 < 50 ms, RSS < 1.5 GB, CPU per reading within 1.2× of 5,000 totes'.
const FLEET_TARGET = { totes: 20_000, pubackP99Ms: 50, rssMb: 1_536, cpuVs5000: 1.2 }

/** The soft limit on open files of this process (the service and the publisher inherit it): one socket per connected tote. */
function openFilesLimit(): number | null {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'))
    const soft = line?.split(/\s{2,}/)[1]
    return soft === undefined || soft === 'unlimited' ? null : Number(soft)
  } catch {
    return null
  }
}
const QUESTDB = SINK === 'questdb-standin' || SINK === 'questdb'
// The QuestDB targets' rates, unless the command line names others.
if (QUESTDB && !process.argv.includes('--rate')) opt.rate = String(QUESTDB_TARGET.singlePerS)
if (QUESTDB && !process.argv.includes('--batch-rate')) opt['batch-rate'] = String(QUESTDB_TARGET.batchPerS / 100)
const TOTES = Number(opt.totes)
const MANY_LIST = opt['many-totes'].split(',').map(Number)
if (MANY_LIST.some((n) => !Number.isSafeInteger(n) || n < 1))
  throw new Error(`--many-totes must be tote counts separated by commas, got ${opt['many-totes']}`)
const MANY_TOTES = Math.max(TOTES, ...MANY_LIST)
const WINDOW = Number(opt.window)
const P99_MS = Number(opt['p99-ms'])
const BREAKS = Math.min(Number(opt.breaks), TOTES)
// The refrigerated profile's hard_min_c is 0 °C (rules/profiles/refrigerated.json): −2 °C breaks at once.
// With --products, 30 °C lies above every band of the products (and the profile has no hard_max_c):
// the items are exhausted at once, a break with reason stability_exhausted.
const BREAK_TEMP_C = opt.products ? 30 : -2
// Capacity probes and ladder steps: long enough for a stable rate, short enough to try several.
const PROBE_MS = 5_000
// Paced seconds before a measured phase (settle()).
const SETTLE_MS = 3_000
// The first seconds of a --many-totes fleet, measured and reported apart from its phase.
const MANY_FIRST_MS = 5_000
// Paced rates tried, as fractions of the closed-loop capacity, until one is sustained. Paced
// messages cost 2-3x the CPU of closed-loop ones (a socket read and a PUBACK write each), so the
// sustainable rate can be well under half the capacity.
const LADDER = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
const PROFILED = new Set(opt['cpu-prof'].split(',').filter(Boolean))
const HEAP_PROFILED = new Set(opt['heap-prof'].split(',').filter(Boolean))
const INSPECTED = PROFILED.size + HEAP_PROFILED.size > 0
const PROFILE_DIR = INSPECTED ? mkdtempSync(join(tmpdir(), 'rxtrace-ingest-prof-')) : null
type Profiler = Awaited<ReturnType<typeof connectProfiler>>
/** The QuestDB process (the stand-in, or a local QuestDB), when there is one: its CPU is measured beside the service's. */
let questdbPid: number | null = null

const log = (line: string) => process.stderr.write(`[bench:ingest] ${line}\n`)

/** The publisher child and a request/response wrapper over its IPC channel. */
function startPublisher() {
  // BENCH_PUBLISHER_PROF=dir: `node --cpu-prof` of the publisher, to check it is not the bottleneck.
  const prof = process.env.BENCH_PUBLISHER_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PUBLISHER_PROF] : []
  const { child, ask } = forkPublisher(prof)
  return {
    child,
    async connect(url: string, totes: ToteCredentials[], subscribeErrors: boolean) {
      const reply = await ask(
        { type: 'connect', url, totes, subscribeErrors, parallel: 50, wire: opt.wire === 'mqttjs' ? 'mqttjs' : 'raw' },
        'connected',
      )
      log(`connected ${reply.connected} totes in ${reply.ms} ms${reply.failed ? `, ${reply.failed} failed: ${reply.firstError}` : ''}`)
      if (reply.failed) throw new Error(`${reply.failed} totes could not connect: ${reply.firstError}`)
    },
    run: async (phase: Phase) => (await ask({ type: 'run', phase }, 'result')).result,
    disconnect: async () => (await ask({ type: 'disconnect' }, 'disconnected')).totals,
    stop: () => child.kill('SIGTERM'),
  }
}

type Measured = {
  result: PhaseResult
  /**
   * CPU of the broker process (service or ceiling) and the publisher, % of one core; us_per_reading
   * is broker CPU per stored reading; questdb_us_per_reading the QuestDB process's, when there is one.
   */
  cpu: { service_pct: number | null; publisher_pct: number | null; us_per_reading: number | null; questdb_us_per_reading: number | null }
  rssPeakMb: number
}

/** Runs a phase while watching the broker process's RSS and both processes' CPU. */
async function measure(
  publisher: ReturnType<typeof startPublisher>,
  brokerPid: number,
  phase: Phase,
  profiler?: Profiler | null,
): Promise<Measured> {
  const profiling = profiler && PROFILED.has(phase.name) ? profiler : null
  const heapProfiling = profiler && HEAP_PROFILED.has(phase.name) ? profiler : null
  await profiling?.start()
  await heapProfiling?.startHeap()
  const rss = watchRss(brokerPid)
  const cpuNow = () => [cpuSeconds(brokerPid), cpuSeconds(publisher.child.pid!), questdbPid === null ? null : cpuSeconds(questdbPid)]
  const cpu0 = cpuNow()
  const t0 = performance.now()
  const result = await publisher.run(phase)
  const seconds = (performance.now() - t0) / 1_000
  const cpu1 = cpuNow()
  if (profiling) {
    const file = join(PROFILE_DIR!, `${phase.name}.cpuprofile`)
    log(
      `CPU profile of the broker process during ${phase.name} (${file}):\n${formatSummary(summarize(await profiling.stop(file), 25)).join('\n')}`,
    )
  }
  if (heapProfiling) {
    const file = join(PROFILE_DIR!, `${phase.name}.heapprofile`)
    log(
      `heap profile of the broker process during ${phase.name} (${file}):\n${formatHeapSummary(await heapProfiling.stopHeap(file), result.ackedReadings).join('\n')}`,
    )
  }
  const pct = (i: number) => (cpu0[i] == null || cpu1[i] == null ? null : round(((cpu1[i]! - cpu0[i]!) / seconds) * 100, 0))
  // Broker CPU per reading does not depend on how busy the rest of the machine is: it is the
  // figure to compare before and after a change when other work shares the cores.
  const perReading = (i: number) =>
    cpu0[i] == null || cpu1[i] == null || result.ackedReadings === 0 ? null : round(((cpu1[i]! - cpu0[i]!) * 1e6) / result.ackedReadings, 2)
  const measured = {
    result,
    cpu: { service_pct: pct(0), publisher_pct: pct(1), us_per_reading: perReading(0), questdb_us_per_reading: perReading(2) },
    rssPeakMb: rss.stop(),
  }
  const r = result
  log(
    `${r.name}: ${round(r.ackedReadings / (r.elapsedMs / 1_000), 0)} readings/s, puback p50 ${round(r.latency.p50, 2)} ms p99 ${round(r.latency.p99, 2)} ms max ${round(r.latency.max, 1)} ms, ` +
      `errors ${r.errors}, rejected ${r.rejected}, behind ${r.behind}, cpu broker ${measured.cpu.service_pct}% (${measured.cpu.us_per_reading} µs/reading) publisher ${measured.cpu.publisher_pct}%` +
      `${questdbPid === null ? '' : `, QuestDB ${pct(2)}% (${measured.cpu.questdb_us_per_reading} µs/reading)`}, rss peak ${measured.rssPeakMb} MB`,
  )
  return measured
}

const throughput = (m: Measured) => ({
  readings_per_s: round(m.result.ackedReadings / (m.result.elapsedMs / 1_000), 0),
  puback_p50_ms: round(m.result.latency.p50, 2),
  puback_p99_ms: round(m.result.latency.p99, 2),
  errors: m.result.errors + m.result.rejected,
})

/** The store the readings go to, per --sink: set up before the service, asked for counts after it. */
async function openReadingsStore() {
  if (SINK === 'postgres') {
    const schema = `rx_bench_${randomBytes(4).toString('hex')}`
    const admin = new pg.Client({ connectionString: opt['database-url'] })
    await admin.connect()
    await admin.query(`create schema "${schema}"`)
    const inSchema = async <T>(query: string): Promise<T[]> => {
      const client = new pg.Client({ connectionString: opt['database-url'], options: `-c search_path=${schema}` })
      await client.connect()
      try {
        return (await client.query(query)).rows as T[]
      } finally {
        await client.end()
      }
    }
    return {
      env: {
        DATABASE_URL: `${opt['database-url']}?options=${encodeURIComponent(`-c search_path=${schema}`)}`,
        SECRETS_KEY: randomBytes(32).toString('base64'),
      },
      events: () => inSchema<{ created_at: string; data: string }>("SELECT created_at, data FROM events WHERE type = 'cold-chain.break'"),
      stored: async () => Number((await inSchema<{ n: string }>('SELECT count(*) AS n FROM readings'))[0]!.n),
      close: async () => {
        await admin.query(`drop schema "${schema}" cascade`)
        await admin.end()
      },
    }
  }
  const sqliteEvents = (dataDir: string) => {
    const db = new Database(join(dataDir, 'rxtrace.db'), { readonly: true, fileMustExist: true })
    const rows = db
      .prepare<[], { created_at: string; data: string }>("SELECT created_at, data FROM events WHERE type = 'cold-chain.break'")
      .all()
    db.close()
    return rows
  }
  if (SINK === 'questdb') return realQuestdb(process.env.QUESTDB_CONFIG!, sqliteEvents)
  if (QUESTDB) {
    const standin = await startQuestdbStandin(Number(opt['questdb-delay-ms']))
    questdbPid = standin.pid
    log(`QuestDB stand-in pid ${standin.pid} (${standin.config}), answering writes after ${opt['questdb-delay-ms']} ms`)
    return {
      env: { QUESTDB_CONFIG: standin.config },
      events: async (dataDir: string) => sqliteEvents(dataDir),
      stored: () => standin.stored(),
      close: () => standin.close(),
    }
  }
  return {
    env: {},
    events: async (dataDir: string) => sqliteEvents(dataDir),
    stored: async (dataDir: string) => countStored(dataDir),
    close: async () => {},
  }
}
type ReadingsStore = Awaited<ReturnType<typeof openReadingsStore>>

/**
 * --sink questdb: the QuestDB QUESTDB_CONFIG names, given to the service as it is (benchServiceEnv
 * drops the shell's settings; this one is asked for). Its table may hold earlier runs' rows: the
 * readings stored are the count's growth over the run. Its CPU is measured when it runs here.
 */
async function realQuestdb(config: string, sqliteEvents: (dataDir: string) => { created_at: string; data: string }[]) {
  const counter = await createQuestdbSink({ config })
  const before = await counter.count()
  const port = localQuestdbPort(config)
  questdbPid = opt['questdb-pid'] ? Number(opt['questdb-pid']) : port === null ? null : listenerPid(port)
  log(
    questdbPid === null
      ? `QuestDB at ${config}: not a process of this machine that can be seen (--questdb-pid names one); its CPU is not measured`
      : `QuestDB pid ${questdbPid} (${config}); its table held ${before} rows`,
  )
  return {
    env: { QUESTDB_CONFIG: config },
    events: async (dataDir: string) => sqliteEvents(dataDir),
    stored: async () => (await counter.count()) - before,
    close: () => counter.close(),
  }
}

async function runService(dataDir: string, readings: ReadingsStore) {
  const [httpPort, mqttPort] = [await freePort(), await freePort()]
  // Readings in the store --sink names (SQLite, PostgreSQL or the QuestDB stand-in).
  // The fixture registers every tote in one fleet; a tenant holds at most TENANT_MAX_TOTES (10,000 by default).
  const env = benchServiceEnv(dataDir, httpPort, {
    MQTT_PORT: String(mqttPort),
    WEBHOOK_ALLOW_PRIVATE: 'false',
    ...(MANY_TOTES > 10_000 ? { TENANT_MAX_TOTES: String(MANY_TOTES) } : {}),
    ...readings.env,
  })
  const service = await startService({ env, httpPort, nodeArgs: INSPECTED ? ['--inspect=127.0.0.1:0'] : [] })
  log(`service pid ${service.pid}: http ${httpPort}, mqtt ${mqttPort}, data ${dataDir}`)
  const profiler = INSPECTED ? await connectProfiler(await inspectorUrlFrom(service.output)) : null
  return { service, mqttUrl: `mqtt://127.0.0.1:${mqttPort}`, profiler }
}

/** Reading → event: `created_at` of each tote's cold-chain.break in the outbox minus its publish time. */
async function breakLatencies(dataDir: string, breaks: PhaseResult['breaks'], readings: ReadingsStore) {
  const rows = await readings.events(dataDir)
  const createdByTote = new Map<string, number>()
  const reasons: Record<string, number> = {}
  for (const row of rows) {
    const data = JSON.parse(row.data) as { tote_id: string; reason?: string }
    createdByTote.set(data.tote_id, Date.parse(row.created_at))
    reasons[data.reason ?? 'unknown'] = (reasons[data.reason ?? 'unknown'] ?? 0) + 1
  }
  const latencies: number[] = []
  for (const b of breaks) {
    const created = createdByTote.get(b.toteId)
    if (created !== undefined) latencies.push(created - b.publishedAtMs)
  }
  return { latencies, events: rows.length, reasons }
}

function countStored(dataDir: string): number {
  const readings = openReadingsReadOnly(join(dataDir, 'readings.db'))
  try {
    return readings.count()
  } finally {
    readings.close()
  }
}

type Publisher = ReturnType<typeof startPublisher>
const perSecond = (m: Measured, unit: 'readings' | 'publishes' = 'readings') =>
  (unit === 'readings' ? m.result.ackedReadings : m.result.acked) / (m.result.elapsedMs / 1_000)

/**
 * Headroom: first the closed-loop capacity (every tote keeps `window` publishes in flight), then
 * paced rates at falling fractions of it until one is delivered in full with a PUBACK p99 under
 * the target (5-s steps: the highest such rate, not a 30-s sustained one). Returns the probe (the
 * capacity) and the step that passed, if any.
 */
async function rateLadder(publisher: Publisher, pid: number, profiler: Profiler | null, name: string, batch: number, window: number) {
  const probe = await measure(publisher, pid, { name: `${name}-probe`, durationMs: PROBE_MS, batch, window }, profiler)
  if (opt['skip-ladder']) return { probe, highest: null }
  const capacity = perSecond(probe, 'publishes')
  for (const fraction of LADDER) {
    const rate = Math.floor(capacity * fraction)
    const step = await measure(
      publisher,
      pid,
      { name: `${name}-at-${Math.round(fraction * 100)}pct`, durationMs: PROBE_MS, batch, window: 4, rate },
      profiler,
    )
    if (perSecond(step, 'publishes') >= rate * 0.97 && step.result.latency.p99 < P99_MS && step.result.errors === 0)
      return { probe, highest: step }
  }
  return { probe, highest: null }
}

/**
 * A few seconds at the paced rate before the measured phase, not reported: the closed-loop probe
 * before it leaves tens of thousands of publishes' garbage and a grown heap, whose collection
 * would otherwise land in the first seconds of the phase that measures the steady state.
 */
async function settle(publisher: Publisher, pid: number, name: string, batch: number, rate: number) {
  await measure(publisher, pid, { name: `${name}-settle`, durationMs: SETTLE_MS, batch, window: 4, rate }, null)
}

const ladderDetail = (highest: Measured | null) =>
  highest
    ? { readings_per_s: round(perSecond(highest), 0), puback_p99_ms: round(highest.result.latency.p99, 2), seconds: PROBE_MS / 1_000 }
    : null

/** A paced run meets its target when (nearly) every paced publish went out and came back in time. */
const metRate = (m: Measured, targetPerS: number) =>
  perSecond(m) >= targetPerS * 0.99 &&
  m.result.behind === 0 &&
  m.result.latency.p99 < TARGET.pubackP99Ms &&
  m.result.errors + m.result.rejected === 0

/**
 * The bare-Aedes ceiling with the same publisher and the same closed loop as the capacity probe;
 * then, when `pacedRate` is given, paced at the service's sustained rate, for the CPU each costs
 * per message at the same offered load.
 */
async function ceilingRun(pacedRate?: number): Promise<{ measured: Measured; paced: Measured | null; rssMb: number | null }> {
  const child: ChildProcess = fork(join(repoRoot, 'test/bench/lib/ingest-ceiling-broker.ts'), [], {
    cwd: repoRoot,
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (m: { type: string; port: number }) => resolve(m.port))
    child.once('exit', (code) => reject(new Error(`ceiling broker exited with code ${code}`)))
  })
  const publisher = startPublisher()
  try {
    // The same number of connections; the ceiling accepts any credentials.
    const totes = Array.from({ length: TOTES }, (_, i) => ({ id: `tt_ceiling_${i}`, username: `tt_ceiling_${i}`, password: 'x' }))
    await publisher.connect(`mqtt://127.0.0.1:${port}`, totes, false)
    await measure(publisher, child.pid!, { name: 'ceiling-warmup', durationMs: 3_000, batch: 1, window: WINDOW })
    const measured = await measure(publisher, child.pid!, {
      name: 'ceiling',
      durationMs: Number(opt['ceiling-s']) * 1_000,
      batch: 1,
      window: WINDOW,
    })
    const rss = rssMb(child.pid!)
    const paced = pacedRate
      ? await measure(publisher, child.pid!, { name: 'ceiling-paced', durationMs: PROBE_MS * 2, batch: 1, window: 4, rate: pacedRate })
      : null
    await publisher.disconnect()
    return { measured, paced, rssMb: rss }
  } finally {
    publisher.stop()
    child.send({ type: 'stop' })
    await new Promise((resolve) => child.once('exit', resolve))
  }
}

async function main() {
  log(
    `machine: ${cpus().length} cpus, node ${process.version}, load average ${loadavg()
      .map((l) => round(l, 2))
      .join(' ')}`,
  )
  if (opt.mode === 'external') {
    const publisher = startPublisher()
    try {
      const modes = await runExternalComparison({
        // --totes defaults to 1,000 for the embedded phases; 500 here keeps the set-up (each tote's account goes to Mosquitto) short.
        totes: process.argv.includes('--totes') ? TOTES : 500,
        rate: process.argv.includes('--rate') ? Number(opt.rate) : 10_000,
        seconds: Number(opt['external-s']),
        breaks: BREAKS,
        databaseUrl: opt['database-url'],
        log,
        ...(opt['external-modes'] ? { modes: new Set(opt['external-modes'].split(',')) } : {}),
        ...(PROFILED.size ? { profile: { modes: PROFILED, dir: PROFILE_DIR! } } : {}),
        publisher: { child: publisher.child, connect: publisher.connect, run: publisher.run, disconnect: publisher.disconnect },
      })
      process.stdout.write(
        JSON.stringify({
          mode: 'external',
          modes,
          machine: { cpus: cpus().length, node: process.version, loadavg_1m: round(loadavg()[0]!, 2) },
        }) + '\n',
      )
    } finally {
      publisher.stop()
    }
    return
  }
  if (opt.mode === 'hard-limit') {
    const report = await hardLimitLatency({
      // --totes defaults to 1,000 for the throughput phases; 200 totes reporting every second is a busy pharmacy's fleet.
      totes: process.argv.includes('--totes') ? TOTES : 200,
      seconds: Number(opt['hard-limit-s']),
      windowS: Number(opt['hard-limit-window-s']),
      log,
    })
    process.stdout.write(
      JSON.stringify({
        mode: 'hard-limit',
        ...report,
        machine: { cpus: cpus().length, node: process.version, loadavg_1m: round(loadavg()[0]!, 2) },
      }) + '\n',
    )
    return
  }
  if (opt.mode !== 'embedded') throw new Error(`--mode must be embedded, external or hard-limit, not ${opt.mode}`)
  if (opt['only-ceiling']) {
    const { measured, paced, rssMb } = await ceilingRun(opt.rate ? Number(opt.rate) : undefined)
    process.stdout.write(
      JSON.stringify({
        ceiling: {
          msgs_per_s: round(perSecond(measured), 0),
          puback_p99_ms: round(measured.result.latency.p99, 2),
          rss_mb: rssMb,
          cpu: measured.cpu,
        },
        paced: paced
          ? {
              msgs_per_s: round(perSecond(paced), 0),
              puback_p50_ms: round(paced.result.latency.p50, 2),
              puback_p99_ms: round(paced.result.latency.p99, 2),
              cpu: paced.cpu,
            }
          : null,
      }) + '\n',
    )
    return
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-ingest-'))
  const readings = await openReadingsStore()
  log(`readings in ${SINK}`)
  const { service, mqttUrl, profiler } = await runService(dataDir, readings)
  let publisher: Publisher | null = null
  let serviceStopped = false
  try {
    const setupStarted = Date.now()
    const fixture = await createFixture(service.baseUrl, BENCH_ADMIN, {
      totes: opt['skip-many'] ? TOTES : MANY_TOTES,
      bound: TOTES,
      onProgress: log,
      products: opt.products,
    })
    log(
      `fixture: ${fixture.totes.length} totes, ${fixture.deliveries.size} dispatched cold-chain deliveries in ${round((Date.now() - setupStarted) / 1_000)} s`,
    )

    publisher = startPublisher()
    // 5,000 connected totes first, on a fresh process: its RSS is not inflated by the memory the
    // flood phases below leave behind. Every tote reports about once a second: a realistic
    // fleet, not a flood.
    let service5000: number | null = null
    const fleets: {
      totes: number
      puback_p50_ms: number
      puback_p99_ms: number
      errors: number
      behind: number
      service_cpu_us_per_reading: number | null
      rss_peak_mb: number
      first_seconds: { seconds: number; puback_p50_ms: number; puback_p99_ms: number }
    }[] = []
    if (!opt['skip-many']) {
      const limit = openFilesLimit()
      for (const count of MANY_LIST) {
        // Each tote is a socket in the service and in the publisher, beside their files and listeners.
        if (limit !== null && count > limit - 100)
          log(
            `${count} totes need ${count} sockets in each process; the open-files limit here is ${limit} (ulimit -n): expect refused connections`,
          )
        await publisher.connect(mqttUrl, fixture.totes.slice(0, count), true)
        // The first seconds apart, as every other phase settles first: every tote's first reading
        // arrives at once (a restart does the same), and each is its tote's first binding read.
        const first = await measure(
          publisher,
          service.pid,
          { name: `many-${count}-first`, durationMs: MANY_FIRST_MS, batch: 1, window: 1, rate: count },
          null,
        )
        const many = await measure(
          publisher,
          service.pid,
          { name: `many-${count}`, durationMs: Number(opt['many-s']) * 1_000, batch: 1, window: 1, rate: count },
          profiler,
        )
        fleets.push({
          totes: count,
          ...throughput(many),
          behind: many.result.behind,
          service_cpu_us_per_reading: many.cpu.us_per_reading,
          rss_peak_mb: many.rssPeakMb,
          first_seconds: {
            seconds: MANY_FIRST_MS / 1_000,
            puback_p50_ms: round(first.result.latency.p50, 2),
            puback_p99_ms: round(first.result.latency.p99, 2),
          },
        })
        if (service5000 === null) service5000 = many.rssPeakMb
        await publisher.disconnect()
      }
    }
    const fleetOf = (n: number) => fleets.find((f) => f.totes === n) ?? null
    const [at5000, at20000] = [fleetOf(5_000), fleets.find((f) => f.totes >= FLEET_TARGET.totes) ?? null]
    const cpuVs5000 =
      at5000?.service_cpu_us_per_reading && at20000?.service_cpu_us_per_reading
        ? round(at20000.service_cpu_us_per_reading / at5000.service_cpu_us_per_reading, 2)
        : null

    const bound = fixture.totes.slice(0, TOTES)
    await publisher.connect(mqttUrl, bound, true)
    const rss1000 = watchRss(service.pid)
    // Loads every delivery's rule state and fills the caches, as a service that has been running would have.
    await measure(publisher, service.pid, { name: 'warmup', durationMs: PROBE_MS, batch: 1, window: WINDOW }, profiler)

    // (a) Single readings: capacity and headroom, then the main run at the target rate, with the breaks.
    const singleSearch = await rateLadder(publisher, service.pid, profiler, 'single', 1, WINDOW)
    const singleRate = Number(opt.rate)
    const singleMs = Number(opt['single-s']) * 1_000
    await settle(publisher, service.pid, 'single', 1, singleRate)
    const single = await measure(
      publisher,
      service.pid,
      {
        name: 'single',
        durationMs: singleMs,
        batch: 1,
        window: 4,
        rate: singleRate,
        // Spread over the phase, leaving its last second for the last event to land.
        breaks: {
          toteIds: bound.slice(0, BREAKS).map((t) => t.id),
          everyMs: Math.max(1, Math.floor((singleMs - 1_000) / Math.max(1, BREAKS))),
          tempC: BREAK_TEMP_C,
        },
      },
      profiler,
    )

    // (b) Gateway batches of 100 readings: one publish in flight per tote for the capacity.
    const batchSearch = await rateLadder(publisher, service.pid, profiler, 'batch100', 100, 1)
    const batchRate = Number(opt['batch-rate'])
    await settle(publisher, service.pid, 'batch100', 100, batchRate)
    const batch = await measure(
      publisher,
      service.pid,
      { name: 'batch100', durationMs: Number(opt['batch-s']) * 1_000, batch: 100, window: 4, rate: batchRate },
      profiler,
    )
    const service1000 = rss1000.stop()
    const totals = await publisher.disconnect()
    publisher.stop()
    publisher = null
    profiler?.close()

    const events = await breakLatencies(dataDir, single.result.breaks, readings)
    const code = await service.stop()
    serviceStopped = true
    if (code !== 0) log(`the service exited with code ${code}:\n${service.output()}`)
    const stored = await readings.stored(dataDir)

    const ceiling = opt['skip-ceiling'] ? null : await ceilingRun(singleRate)
    const ceilingRate = ceiling ? perSecond(ceiling.measured) : null
    const capacity = perSecond(singleSearch.probe)

    const eventP99 = percentile(events.latencies, 99)
    const pipelineVsCeiling = ceilingRate ? capacity / ceilingRate : null
    const questdb = QUESTDB
      ? questdbReport(SINK === 'questdb' ? null : Number(opt['questdb-delay-ms']), phaseFigures(single), phaseFigures(batch), {
          single: singleRate,
          batch: batchRate * 100,
        })
      : null
    const report = {
      // Each of the issue's targets, measured in this run, and whether it was met.
      targets: {
        ...(questdb
          ? { questdb_batches_50000_per_s: questdb.batches.met, questdb_single_10000_per_s_p99_under_100_ms: questdb.single.met }
          : {
              single_20000_per_s_p99_under_50_ms: {
                ...throughput(single),
                seconds: singleMs / 1_000,
                met: metRate(single, TARGET.singlePerS),
              },
              batch100_100000_per_s_p99_under_50_ms: {
                ...throughput(batch),
                seconds: Number(opt['batch-s']),
                met: metRate(batch, TARGET.batchPerS),
              },
            }),
        reading_to_event_p99_under_100_ms: {
          p99_ms: round(eventP99, 1),
          n: events.latencies.length,
          met: events.latencies.length === BREAKS && eventP99 < TARGET.eventP99Ms,
        },
        pipeline_at_least_85pct_of_ceiling: {
          ratio: pipelineVsCeiling === null ? null : round(pipelineVsCeiling, 3),
          met: pipelineVsCeiling === null ? null : pipelineVsCeiling >= TARGET.pipelineVsCeiling,
        },
        rss_under_500_mb_with_5000_totes: { mb: service5000, met: service5000 === null ? null : service5000 < TARGET.rss5000Mb },
        // With --many-totes 5000,20000 (both in the run): the 20,000 figures and their CPU per reading over 5,000's.
        ...(at20000
          ? {
              totes_20000_p99_under_50_ms_rss_under_1_5_gb_cpu_within_1_2x_of_5000: {
                puback_p99_ms: at20000.puback_p99_ms,
                rss_mb: at20000.rss_peak_mb,
                cpu_vs_5000: cpuVs5000,
                met:
                  at20000.errors === 0 &&
                  at20000.behind === 0 &&
                  at20000.puback_p99_ms < FLEET_TARGET.pubackP99Ms &&
                  at20000.rss_peak_mb < FLEET_TARGET.rssMb &&
                  (cpuVs5000 === null ? null : cpuVs5000 <= FLEET_TARGET.cpuVs5000),
              },
            }
          : {}),
        acked_readings_all_stored: { acked: totals.ackedReadings, stored, met: totals.ackedReadings === stored },
      },
      single: throughput(single),
      batch100: throughput(batch),
      // Both QuestDB figures (batches; single readings with PUBACK p99), CPU per reading of the service and of QuestDB (or the stand-in).
      ...(questdb ? { questdb } : {}),
      reading_to_event_ms: {
        p50: round(percentile(events.latencies, 50), 1),
        p99: round(eventP99, 1),
        n: events.latencies.length,
      },
      ceiling: ceiling ? { msgs_per_s: round(ceilingRate!, 0), puback_p99_ms: round(ceiling.measured.result.latency.p99, 2) } : null,
      // Same closed loop (window per tote) on both sides: the service's capacity over the bare broker's.
      pipeline_vs_ceiling: pipelineVsCeiling === null ? null : round(pipelineVsCeiling, 3),
      rss_mb: { service_1000_totes: service1000, service_5000_totes: service5000, ceiling: ceiling?.rssMb ?? null },
      // Each --many-totes phase: every tote publishing once a second.
      fleets,
      open_files_limit: openFilesLimit(),
      committed_check: { published_acked: totals.ackedReadings, stored },
      machine: { cpus: cpus().length, node: process.version, loadavg_1m: round(loadavg()[0]!, 2) },
      sink:
        SINK === 'questdb-standin'
          ? `questdb-standin (writes answered after ${opt['questdb-delay-ms']} ms)`
          : SINK === 'questdb'
            ? `questdb (${process.env.QUESTDB_CONFIG}${questdbPid === null ? ', CPU not measured' : `, pid ${questdbPid}`})`
            : SINK,
      detail: {
        totes: TOTES,
        closed_loop_window: WINDOW,
        single: {
          paced_publishes_per_s: singleRate,
          capacity_readings_per_s: round(capacity, 0),
          ...pacedDetail(single),
          capacity_service_cpu_us_per_reading: singleSearch.probe.cpu.us_per_reading,
          highest_paced_rate: ladderDetail(singleSearch.highest),
        },
        batch100: {
          paced_publishes_per_s: batchRate,
          capacity_readings_per_s: round(perSecond(batchSearch.probe), 0),
          ...pacedDetail(batch),
          capacity_service_cpu_us_per_reading: batchSearch.probe.cpu.us_per_reading,
          highest_paced_rate: ladderDetail(batchSearch.highest),
        },
        ceiling: ceiling
          ? {
              cpu: ceiling.measured.cpu,
              puback_p50_ms: round(ceiling.measured.result.latency.p50, 2),
              // The bare broker at the single phase's paced rate: per-message CPU when messages arrive one by one.
              paced: ceiling.paced
                ? {
                    msgs_per_s: round(perSecond(ceiling.paced), 0),
                    puback_p50_ms: round(ceiling.paced.result.latency.p50, 2),
                    puback_p99_ms: round(ceiling.paced.result.latency.p99, 2),
                    cpu: ceiling.paced.cpu,
                  }
                : null,
            }
          : null,
        // Broker CPU per message over service CPU per reading: the ratio with the other tenants of the machine factored out.
        pipeline_vs_ceiling_cpu:
          ceiling?.measured.cpu.us_per_reading && singleSearch.probe.cpu.us_per_reading
            ? round(ceiling.measured.cpu.us_per_reading / singleSearch.probe.cpu.us_per_reading, 3)
            : null,
        sustained_vs_ceiling: ceilingRate ? round(perSecond(single) / ceilingRate, 3) : null,
        break_events_in_outbox: events.events,
        break_reasons: events.reasons,
        products_per_delivery: opt.products ? 3 : 0,
        breaks_published: single.result.breaks.length,
        service_exit_code: code,
      },
    }
    process.stdout.write(JSON.stringify(report) + '\n')
    if (totals.ackedReadings !== stored) {
      log(`COMMITTED CHECK FAILED: ${totals.ackedReadings} readings acknowledged, ${stored} stored`)
      process.exitCode = 1
    }
  } finally {
    publisher?.stop()
    if (!serviceStopped) await service.stop()
    await readings.close()
    if (!opt['keep-data']) rmSync(dataDir, { recursive: true, force: true })
  }
}

function phaseFigures(m: Measured): PhaseFigures {
  return {
    readingsPerS: perSecond(m),
    p50Ms: m.result.latency.p50,
    p99Ms: m.result.latency.p99,
    errors: m.result.errors + m.result.rejected,
    behind: m.result.behind,
    seconds: m.result.elapsedMs / 1_000,
    cpu: m.cpu,
  }
}

function pacedDetail(m: Measured) {
  return {
    puback_p999_ms: round(m.result.latency.p999, 1),
    puback_max_ms: round(m.result.latency.max, 1),
    service_cpu: m.cpu,
    behind: m.result.behind,
  }
}

main().catch((err: unknown) => {
  log(`failed: ${(err as Error).stack ?? String(err)}`)
  process.exit(1)
})
