/**
 * `npm run bench:history`: does a year of a 2,000-pharmacy chain's history make the hot paths
 * dearer? Builds that year into a DATA_DIR (test/bench/lib/history-build.ts: a million ended
 * deliveries with what their write path leaves, and each cold-chain delivery's readings through
 * the ReadingSink's batches, about 130 million at --scale 1), builds an empty store beside it
 * (the same pharmacies, fleets, totes and measured 24 h delivery, and one day of deliveries so that
 * every measured page is a full one), then measures both the same way in this run, in turns
 * (test/bench/lib/history-measure.ts: both services side by side, each phase `--rounds` times on
 * each, alternating which goes first; a figure is the median of its rounds), and prints one JSON
 * object: each figure on both stores and history ÷ empty, with the targets.
 *
 * Progress on stderr. Options: see `--help`. `--data-dir D` keeps (or reuses) the history; a
 * build that stopped resumes where it stopped; `--skip-build` measures D as it is.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseBenchArgs } from './lib/args.js'
import { buildHistory, readManifest } from './lib/history-build.js'
import { measureStores, READ_PHASES } from './lib/history-measure.js'
import { dropSchema, type PostgresTarget } from './lib/history-postgres.js'
import { round } from './lib/ingest-stats.js'

const opt = parseBenchArgs(
  'bench:history',
  "A year of a pharmacy chain's history against an empty store: the hot paths measured on both in one run. Prints one JSON object on stdout, progress on stderr.",
  {
    scale: { type: 'string', default: '1' },
    'data-dir': { type: 'string', default: '' },
    'skip-build': { type: 'boolean', default: false },
    'build-only': { type: 'boolean', default: false },
    'reading-every-s': { type: 'string', default: '30' },
    'live-totes': { type: 'string', default: '500' },
    rate: { type: 'string', default: '2000' },
    'ingest-s': { type: 'string', default: '20' },
    'http-s': { type: 'string', default: '10' },
    connections: { type: 'string', default: '4' },
    rounds: { type: 'string', default: '3' },
    'keep-data': { type: 'boolean', default: false },
    'database-url': { type: 'string', default: '' },
    schema: { type: 'string', default: 'rx_history' },
  },
  {
    scale: '1 = 2,000 pharmacies and 1,000,000 ended deliveries in the year; 0.01 for a quick check',
    'data-dir': 'where the history is built, or was (kept afterwards); default a temporary directory',
    'skip-build': 'measure --data-dir as it is',
    'build-only': 'build (or finish building) --data-dir and stop: measure it later with --skip-build, on a quiet machine',
    'reading-every-s': 'seconds between readings of a cold-chain delivery in the history',
    'live-totes': 'totes connected for the single-reading phase',
    rate: 'single readings per second over the live totes',
    'ingest-s': 'seconds of the measured single-reading phase',
    'http-s': 'seconds of each HTTP phase',
    connections: 'connections of each HTTP read phase (creates: the same)',
    rounds: 'times each phase is measured on each store, in turns; a figure is the median of its rounds',
    'keep-data': 'keep the temporary directories',
    'database-url':
      'build and measure on this PostgreSQL server instead of SQLite (entities and readings), e.g. postgres://postgres@127.0.0.1:5432/test',
    schema: "with --database-url: the history's schema (kept, like --data-dir); the empty store's is this + _empty, made afresh each run",
  },
)
const log = (line: string) => process.stderr.write(`[bench:history] ${new Date().toISOString().slice(11, 19)} ${line}\n`)
const scale = Number(opt.scale)
if (!(scale > 0 && scale <= 1)) {
  process.stderr.write('bench:history: --scale must be in (0, 1]\n')
  process.exit(2)
}
if (!(Number.isInteger(Number(opt.rounds)) && Number(opt.rounds) >= 1)) {
  process.stderr.write('bench:history: --rounds must be a whole number ≥ 1\n')
  process.exit(2)
}
if ((opt['skip-build'] || opt['build-only']) && !opt['data-dir']) {
  process.stderr.write('bench:history: --skip-build and --build-only need --data-dir\n')
  process.exit(2)
}

// The targets (history ÷ empty, or absolute), on one machine in one run.
const TARGET = { singleCpu: 1.1, traceRatio: 1.2, traceP99Ms: 100, attentionP99Ms: 50, coldStartMs: 10_000, createsCpu: 1.1 }

async function main() {
  log(
    `machine: ${cpus().length} cpus, node ${process.version}, load average ${loadavg()
      .map((l) => round(l, 2))
      .join(' ')}`,
  )
  const historyDir = opt['data-dir'] || mkdtempSync(join(tmpdir(), 'rxtrace-history-'))
  const emptyDir = mkdtempSync(join(tmpdir(), 'rxtrace-history-empty-'))
  mkdirSync(historyDir, { recursive: true })
  const common = { readingEveryS: Number(opt['reading-every-s']), liveTotes: Number(opt['live-totes']) }
  const url = opt['database-url']
  const onPostgres = (schema: string): PostgresTarget | undefined => (url ? { url, schema } : undefined)
  const historyAt = { dataDir: historyDir, postgres: onPostgres(opt.schema) }
  const emptyAt = { dataDir: emptyDir, postgres: onPostgres(`${opt.schema}_empty`) }
  if (url) log(`on PostgreSQL ${url}: the history in schema ${opt.schema}, the empty store in ${opt.schema}_empty`)
  try {
    const t0 = Date.now()
    const history = opt['skip-build']
      ? readManifest(historyDir, historyAt.postgres?.schema)
      : await buildHistory({ ...historyAt, scale, ...common, log: (l) => log(`history ${l}`) })
    if (!history) throw new Error(`${historyDir} holds no history.json: build it first (without --skip-build)`)
    const buildS = round((Date.now() - t0) / 1_000, 0)
    if (opt['build-only']) {
      log(`built ${historyDir} in ${buildS} s`)
      process.stdout.write(`${JSON.stringify({ built: historyDir, build_s: buildS, scale: history.scale }, null, 2)}\n`)
      return
    }
    const empty = await buildHistory({
      ...emptyAt,
      scale: history.scale,
      ...common,
      liveTotes: history.live.length,
      emptyOnly: true,
      log: (l) => log(`empty ${l}`),
    })
    const measure = {
      rate: Number(opt.rate),
      ingestS: Number(opt['ingest-s']),
      httpS: Number(opt['http-s']),
      connections: Number(opt.connections),
      rounds: Number(opt.rounds),
    }
    log(`measuring both stores, ${measure.rounds} rounds of each phase in turns`)
    const { empty: onEmpty, history: onHistory } = await measureStores(
      { location: emptyAt, manifest: empty },
      { location: historyAt, manifest: history },
      { ...measure, log },
    )
    const ratio = (a: number | null | undefined, b: number | null | undefined) =>
      a == null || b == null || b === 0 ? null : round(a / b, 2)
    const traceRatio = ratio(onHistory.trace_24h.p99_ms, onEmpty.trace_24h.p99_ms)
    const singleRatio = ratio(onHistory.ingest.service_cpu_us_per_reading, onEmpty.ingest.service_cpu_us_per_reading)
    const createsRatio = ratio(onHistory.creates.cpu_ms_per_req, onEmpty.creates.cpu_ms_per_req)
    const coldStart = Math.max(onHistory.cold_start_ms.first, onHistory.cold_start_ms.with_open_deliveries)
    const report = {
      targets: {
        single_reading_cpu_within_1_1x: { ratio: singleRatio, met: singleRatio === null ? null : singleRatio <= TARGET.singleCpu },
        trace_24h_p99_within_1_2x_and_under_100_ms: {
          ratio: traceRatio,
          p99_ms: onHistory.trace_24h.p99_ms,
          met: traceRatio === null ? null : traceRatio <= TARGET.traceRatio && onHistory.trace_24h.p99_ms! < TARGET.traceP99Ms,
        },
        attention_queue_p99_under_50_ms: {
          p99_ms: onHistory.attention_queue.p99_ms,
          pharmacy_p99_ms: onHistory.attention_queue_pharmacy.p99_ms,
          met:
            onHistory.attention_queue.p99_ms === null || onHistory.attention_queue_pharmacy.p99_ms === null
              ? false
              : Math.max(onHistory.attention_queue.p99_ms, onHistory.attention_queue_pharmacy.p99_ms) < TARGET.attentionP99Ms,
        },
        cold_start_under_10_s: { ms: coldStart, met: coldStart < TARGET.coldStartMs },
        creates_cpu_within_1_1x: { ratio: createsRatio, met: createsRatio === null ? null : createsRatio <= TARGET.createsCpu },
      },
      ratios: {
        trace_24h_p99: traceRatio,
        attention_queue_p99: ratio(onHistory.attention_queue.p99_ms, onEmpty.attention_queue.p99_ms),
        attention_queue_pharmacy_p99: ratio(onHistory.attention_queue_pharmacy.p99_ms, onEmpty.attention_queue_pharmacy.p99_ms),
        event_feed_first_page_p99: ratio(onHistory.event_feed_first_page.p99_ms, onEmpty.event_feed_first_page.p99_ms),
        event_feed_recent_page_p99: ratio(onHistory.event_feed_recent_page.p99_ms, onEmpty.event_feed_recent_page.p99_ms),
        reconciliation_month_p99: ratio(onHistory.reconciliation_month.p99_ms, onEmpty.reconciliation_month.p99_ms),
        single_reading_cpu: singleRatio,
        creates_cpu: createsRatio,
        cold_start: ratio(onHistory.cold_start_ms.with_open_deliveries, onEmpty.cold_start_ms.with_open_deliveries),
      },
      // Service CPU per request, history ÷ empty: the figure that stays meaningful when other work shares the machine.
      cpu_ratios: Object.fromEntries(
        [...READ_PHASES, 'creates' as const].map((k) => [k, ratio(onHistory[k].cpu_ms_per_req, onEmpty[k].cpu_ms_per_req)]),
      ),
      history: onHistory,
      empty: onEmpty,
      build: {
        scale: history.scale,
        pharmacies: history.pharmacies.length,
        fleets: history.fleets.length,
        totes: history.totes.flat().length + history.live.length,
        ended_deliveries: history.deliveries?.done ?? 0,
        readings_written: history.readings?.written ?? 0,
        reading_every_s: history.readingEveryS,
        phase_seconds: history.phaseSeconds,
        this_run_build_s: opt['skip-build'] ? 0 : buildS,
        data_dir: historyDir,
        engine: url ? 'postgres' : 'sqlite',
        ...(url ? { schema: opt.schema } : {}),
      },
      machine: { cpus: cpus().length, node: process.version, loadavg_1m: round(loadavg()[0]!, 2) },
    }
    process.stdout.write(JSON.stringify(report) + '\n')
  } finally {
    if (!opt['keep-data']) rmSync(emptyDir, { recursive: true, force: true })
    if (!opt['keep-data'] && !opt['data-dir']) rmSync(historyDir, { recursive: true, force: true })
    if (!opt['keep-data'] && emptyAt.postgres) await dropSchema(emptyAt.postgres)
    if (!opt['keep-data'] && !opt['data-dir'] && historyAt.postgres) await dropSchema(historyAt.postgres)
  }
}

main().catch((err: unknown) => {
  log(`failed: ${(err as Error).stack ?? String(err)}`)
  process.exit(1)
})
