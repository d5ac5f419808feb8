/**
 * `npm run bench:idempotency` — what idempotent creates with large bodies leave in memory.
 *
 * The whole service runs in this process on a SQLite file in a fresh temporary DATA_DIR (or on
 * PostgreSQL with --database-url, in its own schema, dropped afterwards). It sends --creates
 * `POST /v1/prescriptions`, each with its own Idempotency-Key and a body of --body-kib KiB (the
 * bulk in `delivery_address`, which the answer repeats), then replays every key once. After each
 * phase, and 2 s later, it collects the heap (run with --expose-gc, as the npm script does) and
 * reports the heap and RSS against the start: the heap is what JavaScript keeps (no answer or
 * body should stay there), the RSS adds SQLite's page cache (SQLITE_CACHE_MIB) and the allocator.
 * Prints one JSON object on stdout; progress goes to stderr.
 *
 * Options: --creates N (300)  --body-kib N (200)  --sqlite-cache-mib N (64)  --database-url URL
 */
import { cpus, loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { parseBenchArgs } from './lib/args.js'
import { startInProcessBenchService } from './lib/in-process-service.js'

const opts = parseBenchArgs(
  'bench:idempotency',
  'Heap and RSS after idempotent creates with large bodies, and after replaying them. Prints one JSON object on stdout.',
  {
    creates: { type: 'string', default: '300' },
    'body-kib': { type: 'string', default: '200' },
    'sqlite-cache-mib': { type: 'string', default: '64' },
    'database-url': { type: 'string', default: '' },
  },
)
const CREATES = Number(opts.creates)
const BODY_BYTES = Number(opts['body-kib']) * 1024
const gc = (globalThis as { gc?: () => void }).gc
const log = (line: string) => process.stderr.write(`${line}\n`)
const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1))

const databaseUrl = opts['database-url']
const bench = await startInProcessBenchService('idem', { SQLITE_CACHE_MIB: opts['sqlite-cache-mib'] }, databaseUrl)
const api = bench.api
try {
  const admin = await api.adminToken()
  const pharmacyId = (await api.pharmacy(admin)).id
  const body = (i: number) => ({
    patient_id: `pt_${i}`,
    cold_chain: false,
    pharmacy_id: pharmacyId,
    delivery_address: { line1: '1 Main St', note: 'x'.repeat(BODY_BYTES - 200) },
  })
  const memory = () => {
    gc?.()
    const { rss, heapUsed } = process.memoryUsage()
    return { rss, heapUsed }
  }
  const start = memory()
  const phase = async (name: string, status: number) => {
    const started = performance.now()
    for (let i = 0; i < CREATES; i++) {
      const res = await api.post('/v1/prescriptions', admin, body(i), { 'idempotency-key': `bench-${i}` })
      if (res.status !== status) throw new Error(`${name} ${i}: ${res.status} ${res.text.slice(0, 200)}`)
    }
    const ms = performance.now() - started
    const after = memory()
    await sleep(2_000)
    const settled = memory()
    const row = {
      phase: name,
      requests: CREATES,
      wall_ms: Math.round(ms),
      heap_growth_mib: mib(after.heapUsed - start.heapUsed),
      rss_growth_mib: mib(after.rss - start.rss),
      rss_growth_2s_later_mib: mib(settled.rss - start.rss),
    }
    log(JSON.stringify(row))
    return row
  }
  const results = [await phase('creates', 201), await phase('replays', 201)]
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'idempotency',
        store: bench.store,
        sqlite_cache_mib: databaseUrl ? null : Number(opts['sqlite-cache-mib']),
        body_kib: BODY_BYTES / 1024,
        gc: Boolean(gc),
        node: process.version,
        cpu: cpus()[0]?.model,
        cores: cpus().length,
        load: loadavg().map((l) => Number(l.toFixed(1))),
        start_rss_mib: mib(start.rss),
        start_heap_mib: mib(start.heapUsed),
        results,
      },
      null,
      2,
    )}\n`,
  )
} finally {
  await bench.stop()
}
