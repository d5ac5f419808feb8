/**
 * `npm run bench:console` — the pharmacist console in headless Chromium (docs/performance.md).
 *
 * The service runs in this process (SQLite in memory, one listener on a free port), seeded
 * through its own ingest pipeline and API. Three figures:
 *   (a) the console's JavaScript, gzipped (console/dist/assets/*.js);
 *   (b) a delivery with 24 h of readings every 5 s (17,280 readings): from navigating to it until
 *       its page, chart included, is drawn (`main[data-ready]`), over `--opens` opens: median and max,
 *       and the service's CPU ms per open (this process's CPU; the browser is another process);
 *   (c) the attention queue of a pharmacy with 5,000 deliveries (100 of them BROKEN):
 *       `GET /v1/deliveries?order=attention&limit=50` over HTTP, `--requests` times, p50/p95 and
 *       CPU ms per request; and the queue page drawn in the browser.
 * One JSON object on stdout.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { cpus, loadavg } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { gzipSync } from 'node:zlib'
import { CONSOLE_DIST } from '../../src/api/routes/console.js'
import { launchChromium, signInToConsole, startConsoleWorld } from '../../test/console/console-world.js'
import { parseBenchArgs } from './lib/args.js'

const raw = parseBenchArgs(
  'bench:console',
  'Opens a 24 h delivery and the 5,000-delivery queue in headless Chromium; measures the bundle.',
  {
    opens: { type: 'string', default: '7' },
    requests: { type: 'string', default: '200' },
    deliveries: { type: 'string', default: '5000' },
  },
  { opens: 'times the 24 h delivery is opened', requests: 'queue API requests', deliveries: 'deliveries in the queue' },
)
const args = { opens: Number(raw.opens), requests: Number(raw.requests), deliveries: Number(raw.deliveries) }
const DAY_MS = 24 * 3_600_000

const cpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}
const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b)
  return Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]! * 10) / 10
}

const world = await startConsoleWorld()
const browser = await launchChromium()
try {
  // (a) size
  const assets = join(CONSOLE_DIST, 'assets')
  const js = readdirSync(assets)
    .filter((f) => f.endsWith('.js'))
    .map((f) => readFileSync(join(assets, f)))
  const jsGzipKb = Math.round(js.reduce((n, b) => n + gzipSync(b, { level: 9 }).length, 0) / 102.4) / 10

  // (b) 24 h at 5 s
  const seedStart = performance.now()
  const big = await world.coldDelivery(DAY_MS, (t) => 5 + 1.5 * Math.sin(t / 3_600_000) + (t % 7_200_000 < 600_000 ? 4 : 0), 5_000)
  const seededS = Math.round((performance.now() - seedStart) / 100) / 10
  const readings = await world.service.sink.count()
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage()
  await signInToConsole(page, world.base)
  const opens: number[] = []
  const drawn: number[] = []
  const cpuBefore = cpuMs()
  for (let i = 0; i < args.opens; i++) {
    await page.goto(`${world.base}/console/#/`)
    await page.locator('table.queue tbody tr').first().waitFor()
    const started = performance.now()
    await page.evaluate((id) => {
      location.hash = `#/delivery/${id}`
    }, big.deliveryId)
    await page.locator('main[data-ready="true"] figure.chart canvas').first().waitFor()
    opens.push(performance.now() - started)
    drawn.push(Number(await page.locator('main').getAttribute('data-drawn-ms')))
  }
  const openCpu = (cpuMs() - cpuBefore) / args.opens

  // (c) 5,000 deliveries
  const queueSeedStart = performance.now()
  for (let i = 0; i < args.deliveries; i++) await world.api.prescription(world.admin, { pharmacy_id: world.pharmacy.id, cold_chain: true })
  const all = await world.service.db
    .selectFrom('deliveries')
    .select(['id', 'cold_chain'])
    .where('pharmacy_id', '=', world.pharmacy.id)
    .execute()
  for (const row of all.slice(0, 100)) {
    await world.service.db
      .updateTable('deliveries')
      .set({ cold_chain: JSON.stringify({ ...JSON.parse(row.cold_chain!), state: 'BROKEN' }) })
      .where('id', '=', row.id)
      .execute()
  }
  const queueSeededS = Math.round((performance.now() - queueSeedStart) / 100) / 10
  const client = (
    await world.api.post('/v1/oauth/clients', world.admin, {
      client_name: 'bench',
      grant_types: ['client_credentials'],
      scope: 'deliveries:read',
      pharmacy_id: world.pharmacy.id,
    })
  ).body
  const token = await world.api.tokenFor(client.client_id, client.client_secret)
  const latencies: number[] = []
  const queueCpuBefore = cpuMs()
  for (let i = 0; i < args.requests; i++) {
    const t0 = performance.now()
    const res = await fetch(`${world.base}/v1/deliveries?order=attention&limit=50`, { headers: { authorization: `Bearer ${token}` } })
    const body = (await res.json()) as { data: { cold_chain: { state: string } }[] }
    latencies.push(performance.now() - t0)
    if (res.status !== 200 || body.data[0]?.cold_chain.state !== 'BROKEN') throw new Error(`queue answered ${res.status}`)
  }
  const queueCpu = (cpuMs() - queueCpuBefore) / args.requests
  const queuePage: number[] = []
  for (let i = 0; i < 5; i++) {
    await page.goto(`${world.base}/console/#/delivery/${big.deliveryId}`)
    await page.locator('main[data-ready="true"]').waitFor()
    const t0 = performance.now()
    await page.evaluate(() => {
      location.hash = '#/'
    })
    await page.locator('table.queue tbody tr').nth(49).waitFor()
    queuePage.push(performance.now() - t0)
  }

  process.stdout.write(
    JSON.stringify(
      {
        machine: {
          cpus: cpus().length,
          model: cpus()[0]?.model,
          loadavg: loadavg().map((l) => Math.round(l * 100) / 100),
          node: process.version,
        },
        console_js_gzip_kb: jsGzipKb,
        delivery_24h: {
          readings,
          seeded_s: seededS,
          opens: args.opens,
          open_to_drawn_ms: { median: percentile(opens, 50), max: percentile(opens, 100) },
          page_measured_ms: { median: percentile(drawn, 50), max: percentile(drawn, 100) },
          service_cpu_ms_per_open: Math.round(openCpu * 10) / 10,
        },
        queue_5000: {
          deliveries: all.length,
          broken: 100,
          seeded_s: queueSeededS,
          requests: args.requests,
          api_ms: { p50: percentile(latencies, 50), p95: percentile(latencies, 95), max: percentile(latencies, 100) },
          service_cpu_ms_per_request: Math.round(queueCpu * 100) / 100,
          page_drawn_ms: { median: percentile(queuePage, 50), max: percentile(queuePage, 100) },
        },
      },
      null,
      2,
    ) + '\n',
  )
} finally {
  await browser.close()
  await world.stop()
}
