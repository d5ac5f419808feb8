/**
 * `npm run bench:fleet:reconciliation` — a fleet's reconciliation over 100,000 ended deliveries.
 *
 * The whole service runs in this process on a SQLite file in a fresh temporary DATA_DIR (or on
 * PostgreSQL with --database-url, in its own schema, dropped afterwards); the deliveries are
 * written straight into the store (test/bench/lib/fleet-seed.ts), then
 * `GET /v1/fleets/{id}/reconciliation` is read in full through the app, JSON and CSV, for
 * periods holding 10 %, 50 % and 100 % of them. For each run: wall time, CPU time (this process:
 * service and reader together) per line, and memory: the heap and RSS peaks over the run,
 * measured from a collected heap before it (run with --expose-gc, as the npm script does). If
 * the body were built in memory the peaks would grow with the period; streamed, they stay flat.
 * One more (untimed) read per period collects the heap every 16 chunks of the body: the largest
 * heap left after those collections (`heap_retained_peak_mib`) is what the stream keeps alive,
 * without the garbage that the plain peaks include.
 * Then `POST /v1/fleets/{id}/reconciliation`, the statement check, with 4 MiB statements: two
 * million malformed lines (a 422 of the first 100 errors), and our own period as JSON lines (the
 * largest honest statement). For each: wall time, the answer's size, the event loop's longest
 * delay while it ran (perf_hooks, 10 ms resolution: how long /healthz would have waited at worst)
 * and the RSS growth.
 * Prints one JSON object on stdout; progress goes to stderr.
 *
 * Options: --deliveries N (default 100000)  --repeat N (3: best wall time of N)  --database-url URL
 */
import { cpus } from 'node:os'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { parseBenchArgs } from './lib/args.js'
import { seedEndedDeliveries } from './lib/fleet-seed.js'
import { startInProcessBenchService } from './lib/in-process-service.js'

const opts = parseBenchArgs(
  'bench:fleet:reconciliation',
  "Reconciliation of a fleet's ended deliveries, streamed: time, CPU and memory per period size. Prints one JSON object on stdout.",
  {
    deliveries: { type: 'string', default: '100000' },
    repeat: { type: 'string', default: '3' },
    'database-url': { type: 'string', default: '' },
  },
)
const COUNT = Number(opts.deliveries)
const REPEAT = Number(opts.repeat)
const FROM = Date.parse('2026-11-01T00:00:00.000Z')
const TO = Date.parse('2026-12-01T00:00:00.000Z')
const gc = (globalThis as { gc?: () => void }).gc
const log = (line: string) => process.stderr.write(`${line}\n`)

const databaseUrl = opts['database-url']
const bench = await startInProcessBenchService('fleet', { TOKEN_TTL_S: '86400' }, databaseUrl)
const api = bench.api
try {
  const admin = await api.adminToken()
  const fleetId = (await api.post('/v1/fleets', admin, { name: 'Bench Couriers' })).body.id as string
  const pharmacyId = (await api.pharmacy(admin)).id
  log(`seeding ${COUNT} ended deliveries…`)
  const seedStart = performance.now()
  await seedEndedDeliveries(api.service.db, { fleetId, pharmacyId, count: COUNT, fromMs: FROM, toMs: TO, seed: 42 })
  log(`seeded in ${Math.round(performance.now() - seedStart)} ms`)

  /** One read of the period; with `retained`, a collection every 16 chunks measures what the stream keeps alive. */
  async function run(share: number, accept: string, retained = false) {
    const to = new Date(FROM + Math.round((TO - FROM) * share)).toISOString()
    const path = `/v1/fleets/${fleetId}/reconciliation?from=${new Date(FROM).toISOString()}&to=${to}`
    gc?.()
    const base = process.memoryUsage()
    let heapPeak = base.heapUsed
    let rssPeak = base.rss
    const cpu = process.cpuUsage()
    const started = performance.now()
    const res = await api.service.app.request(path, { headers: { authorization: `Bearer ${admin}`, accept } })
    if (res.status !== 200) throw new Error(`${res.status} ${await res.text()}`)
    const reader = res.body!.getReader()
    let bytes = 0
    let chunks = 0
    let retainedPeak = 0
    let last = new Uint8Array()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      bytes += value.length
      last = value // only the end is read (the totals), so the reader costs next to nothing
      if (retained && gc && ++chunks % 16 === 0) {
        gc()
        retainedPeak = Math.max(retainedPeak, process.memoryUsage().heapUsed - base.heapUsed)
      }
      const now = process.memoryUsage()
      heapPeak = Math.max(heapPeak, now.heapUsed)
      rssPeak = Math.max(rssPeak, now.rss)
    }
    const ms = performance.now() - started
    const used = process.cpuUsage(cpu)
    const lines = accept === 'text/csv' ? null : Number(/"totals":\{"lines":(\d+)/.exec(new TextDecoder().decode(last.subarray(-400)))?.[1])
    return {
      ms,
      cpuMs: (used.user + used.system) / 1000,
      bytes,
      lines,
      heapGrowthMiB: (heapPeak - base.heapUsed) / 2 ** 20,
      rssGrowthMiB: (rssPeak - base.rss) / 2 ** 20,
      retainedMiB: retainedPeak / 2 ** 20,
    }
  }

  const results = []
  for (const accept of ['application/json', 'text/csv']) {
    for (const share of [0.1, 0.5, 1]) {
      const runs = []
      for (let i = 0; i < REPEAT; i++) runs.push(await run(share, accept))
      const best = runs.reduce((a, b) => (b.ms < a.ms ? b : a))
      const kept = gc ? (await run(share, accept, true)).retainedMiB : null // not timed: the collections cost time
      const lines = best.lines ?? Math.round(COUNT * share)
      const row = {
        format: accept === 'text/csv' ? 'csv' : 'json',
        period_share: share,
        lines: best.lines ?? `≈${lines}`,
        wall_ms: Math.round(best.ms),
        lines_per_s: Math.round(lines / (best.ms / 1000)),
        cpu_us_per_line: Number(((best.cpuMs * 1000) / lines).toFixed(2)),
        body_mib: Number((best.bytes / 2 ** 20).toFixed(1)),
        heap_peak_growth_mib: Number(Math.max(...runs.map((r) => r.heapGrowthMiB)).toFixed(1)),
        rss_peak_growth_mib: Number(Math.max(...runs.map((r) => r.rssGrowthMiB)).toFixed(1)),
        heap_retained_peak_mib: kept === null ? null : Number(kept.toFixed(1)),
      }
      log(JSON.stringify(row))
      results.push(row)
    }
  }
  /** One statement check: wall time, answer size, the event loop's longest stall and the RSS growth while it ran. */
  async function check(name: string, statement: string) {
    const path = `/v1/fleets/${fleetId}/reconciliation?from=${new Date(FROM).toISOString()}&to=${new Date(TO).toISOString()}`
    gc?.()
    const base = process.memoryUsage().rss
    let rssPeak = base
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 5)
    const loop = monitorEventLoopDelay({ resolution: 10 })
    loop.enable()
    const started = performance.now()
    const res = await api.service.app.request(path, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/x-ndjson' },
      body: statement,
    })
    const answer = await res.text()
    const ms = performance.now() - started
    loop.disable()
    clearInterval(sampler)
    rssPeak = Math.max(rssPeak, process.memoryUsage().rss)
    const row = {
      statement: name,
      statement_mib: Number((Buffer.byteLength(statement) / 2 ** 20).toFixed(2)),
      status: res.status,
      wall_ms: Math.round(ms),
      answer_kib: Number((Buffer.byteLength(answer) / 1024).toFixed(1)),
      event_loop_max_delay_ms: Math.round(loop.max / 1e6),
      rss_peak_growth_mib: Number(((rssPeak - base) / 2 ** 20).toFixed(1)),
    }
    log(JSON.stringify(row))
    return row
  }
  const STATEMENT_LIMIT = 4 * 1024 * 1024
  const ours = await api.service.app.request(
    `/v1/fleets/${fleetId}/reconciliation?from=${new Date(FROM).toISOString()}&to=${new Date(TO).toISOString()}`,
    { headers: { authorization: `Bearer ${admin}`, accept: 'text/csv' } },
  )
  let honest = ''
  for (const line of (await ours.text()).split('\r\n').slice(1)) {
    const [delivery_id, , , , , , , , , , , , , , , payout_cents] = line.split(',')
    const next = `${JSON.stringify({ delivery_id, payout_cents: Number(payout_cents) })}\n`
    if (!delivery_id || honest.length + next.length > STATEMENT_LIMIT) break
    honest += next
  }
  const statements = [
    await check('2M malformed lines', 'x\n'.repeat(STATEMENT_LIMIT / 2)),
    await check(`${honest.split('\n').length - 1} lines of ours`, honest),
  ]

  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'fleet:reconciliation',
        store: bench.store,
        deliveries: COUNT,
        repeat: REPEAT,
        gc: Boolean(gc),
        node: process.version,
        cpu: cpus()[0]?.model,
        cores: cpus().length,
        results,
        statements,
      },
      null,
      2,
    )}\n`,
  )
} finally {
  await bench.stop()
}
