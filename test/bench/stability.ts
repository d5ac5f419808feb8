/**
 * `npm run bench:stability`: how long the stability ledger takes to recompute a whole delivery from
 * its readings, as a late reading makes it do. A 24 h delivery read every 5 s (17,280 readings), three
 * items with six bands each, temperatures wandering through every band; `--runs` recomputes after
 * `--warmup` ones, on one core, nothing else in the process. Prints one JSON object on stdout.
 */
import { cpus, loadavg } from 'node:os'
import { performance } from 'node:perf_hooks'
import { openLedger, replayLedger, type ItemStability } from '../../rules/index.js'
import { parseBenchArgs } from './lib/args.js'
import { percentile, round } from './lib/ingest-stats.js'

const opt = parseBenchArgs(
  'bench:stability',
  'Stability ledger recompute time for one long delivery. Prints one JSON object on stdout.',
  {
    hours: { type: 'string', default: '24' },
    'interval-s': { type: 'string', default: '5' },
    runs: { type: 'string', default: '50' },
    warmup: { type: 'string', default: '10' },
  },
  { hours: 'delivery length', 'interval-s': 'seconds between readings', runs: 'timed recomputes', warmup: 'untimed recomputes first' },
)

const sixBands = (storageMin: number, storageMax: number): ItemStability['stability'] => ({
  storage: { min_c: storageMin, max_c: storageMax },
  budgets: [
    { min_c: storageMax, max_c: storageMax + 4, allowed_s: 36_000 },
    { min_c: storageMax + 4, max_c: storageMax + 10, allowed_s: 14_400 },
    { min_c: storageMax + 10, max_c: storageMax + 20, allowed_s: 3600 },
    { min_c: storageMin - 2, max_c: storageMin, allowed_s: 7200 },
    { min_c: storageMin - 5, max_c: storageMin - 2, allowed_s: 1800 },
    { min_c: storageMin - 10, max_c: storageMin - 5, allowed_s: 600 },
  ],
  freeze_thaw_max: 3,
  hard_min_c: storageMin - 10,
  hard_max_c: storageMax + 20,
  source: 'bench',
})
const items: ItemStability[] = [
  { ndc: '00002-8215-01', product_id: 'pr_a', version: 1, stability: sixBands(2, 8) },
  { ndc: '00003-0001-11', product_id: 'pr_b', version: 1, stability: sixBands(3, 7) },
  { ndc: '00004-0002-22', product_id: 'pr_c', version: 1, stability: sixBands(2, 10) },
]

const intervalMs = Number(opt['interval-s']) * 1000
const count = Math.round((Number(opt.hours) * 3600_000) / intervalMs)
const start = Date.UTC(2025, 0, 6)
// Mostly in storage, with a slow swing out into the warm and cold bands a few times a day.
const readings = Array.from({ length: count }, (_, i) => ({
  ts: start + i * intervalMs,
  temp_c: Math.round((5 + 9 * Math.sin(i / 1500) + Math.sin(i / 7)) * 10) / 10,
}))
const ledger = openLedger(items, 900)

const runs = Number(opt.runs)
const timings: number[] = []
let events = 0
for (let i = 0; i < Number(opt.warmup) + runs; i++) {
  const t0 = performance.now()
  const result = replayLedger(ledger, readings)
  const ms = performance.now() - t0
  events = result.events.length
  if (i >= Number(opt.warmup)) timings.push(ms)
}

process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'stability ledger recompute',
      readings: count,
      items: items.length,
      bands_per_item: 6,
      events,
      runs,
      recompute_ms: { p50: round(percentile(timings, 50), 2), p99: round(percentile(timings, 99), 2), max: round(Math.max(...timings), 2) },
      target_ms: 50,
      machine: { cpus: cpus().length, model: cpus()[0]?.model, loadavg_1m: round(loadavg()[0]!, 2), node: process.version },
    },
    null,
    2,
  )}\n`,
)
