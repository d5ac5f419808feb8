/**
 * `npm run bench:fleet`: the Fleet Operator surfaces under load, in sections chosen with
 * `--sections` (comma-separated: exceptions, reconciliation, positions, uploads; default exceptions).
 * Section `positions` (drivers' positions over MQTT and the ETA webhooks they cause) is described
 * in test/bench/lib/fleet-positions.ts. Prints one JSON object on stdout
 * (`{ machine, sections: { <name>: … } }`), progress on stderr. A new section is a function in
 * `SECTIONS` with its own options, and its own key in the output.
 *
 * Section `exceptions` — the exception feed's live fan-out:
 * 1. The service runs as a child process exactly as `npm start` would (SQLite, fresh DATA_DIR,
 *    REORDER_WINDOW_S=0), with room for the subscribers in EVENT_STREAM_MAX_PER_TENANT.
 * 2. A fleet gets `--totes` totes; the first `--bound` are dispatched on cold-chain deliveries.
 * 3. Baseline: the publisher child (test/bench/lib/ingest-publisher.ts: MQTT 3.1.1, QoS 1) sends
 *    `--rate` single readings/s for `--baseline-s` with no stream open: PUBACK p99 alone.
 * 4. `--subscribers` SSE readers (node:http, in this process) open
 *    GET /v1/fleets/{id}/exceptions/stream with the fleet's own token.
 * 5. The same reading stream runs for `--seconds`, and every `--break-every-ms` a bound tote
 *    publishes −2 °C (below the refrigerated hard_min_c): a `cold-chain.break` for its delivery.
 *    Latency = the moment a subscriber has parsed the event − the moment the reading was
 *    published (same machine, same clock), for every subscriber and every break.
 * 6. Service CPU (from /proc) per reading, and the service's RSS with the streams open.
 * 7. Before 5, with no readings: `--fanout-events` refused `deliver` actions one at a time, each
 *    `handoff.refused` awaited by every stream: POST sent → parsed by each reader, and service
 *    CPU per frame delivered (the POST's own cost, ~0.5 ms, is in it, spread over the readers).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { request, Agent, type IncomingMessage } from 'node:http'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fork } from 'node:child_process'
import { parseBenchArgs } from './lib/args.js'
import { forkPublisher } from './lib/publisher-child.js'
import { clientCredentialsToken } from './lib/api-client.js'
import type { Phase } from './lib/ingest-protocol.js'
import { apiClient, createFixture, freePort, repoRoot, startService, type ServiceChild } from './lib/ingest-service.js'
import { BENCH_ADMIN, benchServiceEnv } from './lib/service-process.js'
import { cpuSeconds, percentile, pubackFigures, round, rssMb, watchRss } from './lib/ingest-stats.js'
import { positionsSection } from './lib/fleet-positions.js'

const opt = parseBenchArgs(
  'bench:fleet',
  'Fleet Operator benchmarks, in sections. Prints one JSON object on stdout, progress on stderr.',
  {
    sections: { type: 'string', default: 'exceptions' },
    subscribers: { type: 'string', default: '1000' },
    totes: { type: 'string', default: '200' },
    bound: { type: 'string', default: '100' },
    rate: { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '20' },
    'baseline-s': { type: 'string', default: '10' },
    'break-every-ms': { type: 'string', default: '500' },
    'fanout-events': { type: 'string', default: '20' },
    'keep-data': { type: 'boolean', default: false },
    deliveries: { type: 'string', default: '100000' },
    repeat: { type: 'string', default: '3' },
    drivers: { type: 'string', default: '1000' },
    'position-totes': { type: 'string', default: '5000' },
    'tote-rate': { type: 'string', default: '5000' },
    'position-seconds': { type: 'string', default: '120' },
    'position-every-s': { type: 'string', default: '5' },
    uploads: { type: 'string', default: '20' },
    rounds: { type: 'string', default: '3' },
  },
  {
    sections: 'comma-separated sections to run: exceptions, reconciliation, positions, uploads',
    drivers: 'positions: drivers, each publishing its position over MQTT with its own token',
    'position-totes': 'positions: totes publishing readings alongside',
    'tote-rate': 'positions: readings per second over all those totes (1 per tote per second by default)',
    'position-seconds': 'positions: length of the measured run (a delivery announces an ETA change at most once a minute)',
    'position-every-s': 'positions: seconds between two positions of a driver',
    uploads: 'uploads: concurrent 5 MiB proof-of-delivery image uploads per round',
    rounds: 'uploads: rounds of them',
    deliveries: 'reconciliation: ended deliveries of the fleet',
    repeat: 'reconciliation: runs per period and format (the best wall time is kept)',
    subscribers: 'exceptions: concurrent SSE readers of the fleet exception stream',
    totes: 'exceptions: totes publishing readings (QoS 1)',
    bound: 'exceptions: totes on a dispatched cold-chain delivery (each can break once)',
    rate: 'exceptions: single readings per second over all totes',
    seconds: 'exceptions: length of the run with the streams open',
    'baseline-s': 'exceptions: length of the run without streams (PUBACK alone)',
    'break-every-ms': 'exceptions: one cold-chain break this often',
    'fanout-events': 'exceptions: refused handoffs sent one at a time to all streams, with no readings (CPU per frame)',
    'keep-data': 'keep the service data directory',
  },
)

const log = (line: string) => process.stderr.write(`[bench:fleet] ${line}\n`)
// The targets of the fleet issue, on this 2-core machine.
const TARGET = { exceptionP99Ms: 1_000, pubackP99Ms: 50 }

/** The service for a section: its own process, DATA_DIR and ports. */
async function startFleetService(extraEnv: Record<string, string>) {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-fleet-'))
  const [httpPort, mqttPort] = [await freePort(), await freePort()]
  const env = benchServiceEnv(dataDir, httpPort, { MQTT_PORT: String(mqttPort), ...extraEnv })
  const service = await startService({
    env,
    httpPort,
    nodeArgs: process.env.BENCH_FLEET_NODE_ARGS ? process.env.BENCH_FLEET_NODE_ARGS.split(' ') : [],
  })
  log(`service pid ${service.pid}: http ${httpPort}, mqtt ${mqttPort}, data ${dataDir}`)
  return {
    service,
    dataDir,
    mqttUrl: `mqtt://127.0.0.1:${mqttPort}`,
    async stop() {
      const code = await service.stop()
      if (!opt['keep-data']) rmSync(dataDir, { recursive: true, force: true })
      return code
    },
  }
}

/** The publisher child of bench:ingest, over its IPC protocol. */
function startPublisher() {
  const { child, ask } = forkPublisher()
  return {
    child,
    connect: (url: string, totes: { id: string; username: string; password: string }[]) =>
      ask({ type: 'connect', url, totes, subscribeErrors: false, parallel: 50, wire: 'raw' }, 'connected'),
    run: async (phase: Phase) => (await ask({ type: 'run', phase }, 'result')).result,
    disconnect: () => ask({ type: 'disconnect' }, 'disconnected'),
    stop: () => child.kill('SIGTERM'),
  }
}

/**
 * One SSE reader on a plain node:http connection: parses frames, and notes when it first saw a
 * `cold-chain.break` of each delivery.
 */
function subscribe(url: string, token: string, agent: Agent) {
  const seen = new Map<string, number>()
  const refusals: number[] = []
  let status = 0
  let buffer = ''
  let frames = 0
  let ended = false
  let res: IncomingMessage | null = null
  const opened = new Promise<void>((resolve, reject) => {
    const req = request(url, { agent, headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (response) => {
      res = response
      status = response.statusCode ?? 0
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        buffer += chunk
        let end: number
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const block = buffer.slice(0, end)
          buffer = buffer.slice(end + 2)
          const data = block.split('\n').find((line) => line.startsWith('data: '))
          if (!data) continue
          frames += 1
          const event = JSON.parse(data.slice(6)) as { type: string; delivery_id: string }
          if (event.type === 'cold-chain.break' && !seen.has(event.delivery_id)) seen.set(event.delivery_id, Date.now())
          else if (event.type === 'handoff.refused') refusals.push(Date.now())
        }
      })
      response.on('end', () => (ended = true))
      response.on('error', () => (ended = true))
      resolve()
    })
    req.on('error', reject)
    req.end()
  })
  return {
    opened,
    seen,
    refusals,
    get status() {
      return status
    },
    get frames() {
      return frames
    },
    get ended() {
      return ended
    },
    close: () => res?.destroy(),
  }
}

const latencySummary = (values: number[]) =>
  values.length
    ? {
        n: values.length,
        p50_ms: round(percentile(values, 50), 1),
        p90_ms: round(percentile(values, 90), 1),
        p99_ms: round(percentile(values, 99), 1),
        max_ms: round(Math.max(...values), 1),
      }
    : { n: 0 }

/** Runs a phase and the service CPU it cost. */
async function measured(publisher: ReturnType<typeof startPublisher>, service: ServiceChild, phase: Phase) {
  const cpu0 = cpuSeconds(service.pid)
  const t0 = performance.now()
  const result = await publisher.run(phase)
  const seconds = (performance.now() - t0) / 1_000
  const cpu1 = cpuSeconds(service.pid)
  const cpu = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0
  return {
    result,
    cpu: {
      service_pct: cpu === null ? null : round((cpu / seconds) * 100, 0),
      us_per_reading: cpu === null || !result.ackedReadings ? null : round((cpu * 1e6) / result.ackedReadings, 1),
      seconds: cpu === null ? null : round(cpu, 2),
    },
  }
}

async function exceptionsSection() {
  const subscribers = Number(opt.subscribers)
  const totes = Number(opt.totes)
  const bound = Math.min(Number(opt.bound), totes)
  const seconds = Number(opt.seconds)
  const everyMs = Number(opt['break-every-ms'])
  const breaks = Math.min(bound, Math.floor((seconds * 1_000) / everyMs))
  const { service, mqttUrl, stop } = await startFleetService({ EVENT_STREAM_MAX_PER_TENANT: String(subscribers + 10) })
  const publisher = startPublisher()
  const agent = new Agent({ keepAlive: false, maxSockets: Infinity })
  const readers: ReturnType<typeof subscribe>[] = []
  try {
    const fixture = await createFixture(service.baseUrl, BENCH_ADMIN, { totes, bound, onProgress: log })
    log(`fixture: ${totes} totes, ${bound} cold-chain deliveries dispatched to fleet ${fixture.fleetId}`)
    const admin = apiClient(service.baseUrl)
    await admin.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const client = await admin.post<{ client_id: string; client_secret: string }>('/v1/oauth/clients', {
      client_name: 'bench fleet reader',
      scope: 'deliveries:read',
      fleet_id: fixture.fleetId,
    })
    const fleetToken = await clientCredentialsToken(service.baseUrl, client.client_id, client.client_secret)

    const connected = await publisher.connect(mqttUrl, fixture.totes)
    if (connected.failed) throw new Error(`${connected.failed} totes could not connect: ${connected.firstError}`)
    const phase = (name: string, durationMs: number, extra: Partial<Phase> = {}): Phase => ({
      name,
      durationMs,
      batch: 1,
      window: 4,
      rate: Number(opt.rate),
      ...extra,
    })
    await publisher.run(phase('warmup', 3_000))
    const baseline = await measured(publisher, service, phase('readings-alone', Number(opt['baseline-s']) * 1_000))
    log(
      `baseline: ${JSON.stringify(pubackFigures(baseline.result))}, service cpu ${baseline.cpu.service_pct}% (${baseline.cpu.us_per_reading} µs/reading)`,
    )

    const rssBefore = rssMb(service.pid)
    const cpuOpen0 = cpuSeconds(service.pid)
    const openStarted = performance.now()
    const streamUrl = `${service.baseUrl}/v1/fleets/${fixture.fleetId}/exceptions/stream`
    for (let i = 0; i < subscribers; i += 100) {
      const batch = Array.from({ length: Math.min(100, subscribers - i) }, () => subscribe(streamUrl, fleetToken, agent))
      readers.push(...batch)
      await Promise.all(batch.map((r) => r.opened))
    }
    const openMs = performance.now() - openStarted
    const cpuOpen = cpuOpen0 === null ? null : (cpuSeconds(service.pid) ?? cpuOpen0) - cpuOpen0
    const refused = readers.filter((r) => r.status !== 200).length
    if (refused)
      throw new Error(`${refused} of ${subscribers} streams were refused (status ${readers.find((r) => r.status !== 200)?.status})`)
    log(`${subscribers} streams open in ${Math.round(openMs)} ms; service rss ${rssBefore} → ${rssMb(service.pid)} MB`)

    // Fan-out alone (no readings): refused deliver actions on a dispatched delivery, one at a time,
    // each `handoff.refused` awaited by every stream: service CPU per frame delivered.
    const fanoutEvents = Number(opt['fanout-events'])
    const refusedOn = [...fixture.deliveries.values()].at(-1)!
    const fanoutLatencies: number[] = []
    const adminToken = await clientCredentialsToken(service.baseUrl, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const cpuFan0 = cpuSeconds(service.pid)
    for (let i = 0; i < fanoutEvents; i++) {
      const sent = Date.now()
      await fetch(`${service.baseUrl}/v1/deliveries/${refusedOn}/deliver`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ verification: { method: 'otp', evidence: '000000' } }),
      }).then(async (r) => {
        if (r.status !== 409) throw new Error(`a refused deliver answered ${r.status}: ${await r.text()}`)
        await r.text()
      })
      const deadline = Date.now() + 10_000
      while (Date.now() < deadline && !readers.every((r) => r.refusals.length > i)) await new Promise((resolve) => setTimeout(resolve, 5))
      for (const reader of readers) if (reader.refusals[i] !== undefined) fanoutLatencies.push(reader.refusals[i]! - sent)
    }
    const cpuFan = cpuFan0 === null ? null : (cpuSeconds(service.pid) ?? cpuFan0) - cpuFan0
    const fanout = {
      events: fanoutEvents,
      ...latencySummary(fanoutLatencies),
      missed: fanoutEvents * subscribers - fanoutLatencies.length,
      service_cpu_us_per_frame: cpuFan === null || !fanoutLatencies.length ? null : round((cpuFan * 1e6) / fanoutLatencies.length, 1),
    }
    log(`fan-out alone: ${JSON.stringify(fanout)}`)

    const breakTotes = fixture.totes.slice(0, breaks).map((t) => t.id)
    const run = await measured(
      publisher,
      service,
      phase('readings-with-streams', seconds * 1_000, { breaks: { toteIds: breakTotes, everyMs, tempC: -2 } }),
    )
    // Events of the last breaks are still on their way when the phase ends.
    const deadline = Date.now() + 5_000
    const expected = run.result.breaks.map((b) => fixture.deliveries.get(b.toteId)!)
    while (Date.now() < deadline && !readers.every((r) => expected.every((d) => r.seen.has(d))))
      await new Promise((resolve) => setTimeout(resolve, 50))
    const rssWithStreams = rssMb(service.pid)

    const latencies: number[] = []
    let missed = 0
    for (const b of run.result.breaks) {
      const deliveryId = fixture.deliveries.get(b.toteId)!
      for (const reader of readers) {
        const at = reader.seen.get(deliveryId)
        if (at === undefined) missed += 1
        else latencies.push(at - b.publishedAtMs)
      }
    }
    const exceptions = latencySummary(latencies)
    const endedEarly = readers.filter((r) => r.ended).length
    log(
      `exceptions: ${run.result.breaks.length} breaks × ${subscribers} streams: ${JSON.stringify(exceptions)}, missed ${missed}, streams ended early ${endedEarly}`,
    )
    log(
      `with streams: ${JSON.stringify(pubackFigures(run.result))}, service cpu ${run.cpu.service_pct}% (${run.cpu.us_per_reading} µs/reading)`,
    )
    const withStreams = pubackFigures(run.result)
    return {
      settings: {
        subscribers,
        totes,
        bound,
        readings_per_s: Number(opt.rate),
        seconds,
        baseline_s: Number(opt['baseline-s']),
        break_every_ms: everyMs,
        breaks: run.result.breaks.length,
      },
      streams: {
        open_ms: Math.round(openMs),
        open_cpu_ms_per_stream: cpuOpen === null ? null : round((cpuOpen * 1_000) / subscribers, 2),
        rss_mb_before: rssBefore,
        rss_mb_with_streams: rssWithStreams,
        ended_early: endedEarly,
      },
      fanout_alone: fanout,
      exception_latency: { ...exceptions, missed },
      readings_alone: {
        ...pubackFigures(baseline.result),
        service_cpu_pct: baseline.cpu.service_pct,
        service_us_per_reading: baseline.cpu.us_per_reading,
      },
      readings_with_streams: {
        ...withStreams,
        service_cpu_pct: run.cpu.service_pct,
        service_us_per_reading: run.cpu.us_per_reading,
      },
      targets: {
        exception_p99_under_1s: exceptions.n > 0 && missed === 0 && (exceptions.p99_ms ?? Infinity) < TARGET.exceptionP99Ms,
        puback_p99_under_50ms_with_streams: withStreams.puback_p99_ms < TARGET.pubackP99Ms && withStreams.errors === 0,
      },
    }
  } finally {
    for (const reader of readers) reader.close()
    agent.destroy()
    await publisher.disconnect().catch(() => {})
    publisher.stop()
    const code = await stop()
    log(`service stopped with code ${code}`)
  }
}

/**
 * Section `reconciliation` — test/bench/fleet-reconciliation.ts in its own node process (with
 * --expose-gc, so its memory peaks are measured from a collected heap): 100,000 ended
 * deliveries (`--deliveries`) read as JSON and CSV for periods of 10 %, 50 % and 100 % of them.
 */
async function reconciliationSection(): Promise<unknown> {
  const child = fork(join(repoRoot, 'test/bench/fleet-reconciliation.ts'), ['--deliveries', opt.deliveries, '--repeat', opt.repeat], {
    execArgv: ['--expose-gc', '--import', 'tsx'],
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  })
  let out = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString()
  })
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve))
  if (code !== 0) throw new Error(`test/bench/fleet-reconciliation.ts exited with ${code}`)
  return JSON.parse(out)
}

/**
 * Section `uploads` — proof-of-delivery images (docs/api.md, Proof of delivery): `--uploads`
 * concurrent uploads of a 5 MiB JPEG (each a different image, so each is stored), `--rounds`
 * times, to one picked-up delivery each, by the operator client over node:http. The service's
 * RSS is sampled every 100 ms; the figure is its peak over the rounds minus its RSS before the
 * first, after one warm-up round that fills SQLite's page cache (target: ≤ 64 MiB). Uploads are
 * read and stored 2 at a time by the service: the rest wait unread.
 */
async function uploadsSection(): Promise<unknown> {
  const { service, stop } = await startFleetService(process.env.BENCH_UPLOADS_ENV ? JSON.parse(process.env.BENCH_UPLOADS_ENV) : {})
  try {
    const admin = apiClient(service.baseUrl)
    await admin.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const pharmacy = await admin.post<{ id: string }>('/v1/pharmacies', {
      name: 'Bench Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    const fleet = await admin.post<{ id: string }>('/v1/fleets', { name: 'Bench Couriers' })
    const driver = await admin.post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name: 'Dana Driver' })
    const count = Number(opt.uploads)
    const deliveries: string[] = []
    for (let i = 0; i < count; i++) {
      const rx = await admin.post<{ delivery_id: string }>(
        '/v1/prescriptions',
        { patient_id: `pt_${i}`, cold_chain: false, pharmacy_id: pharmacy.id },
        { 'idempotency-key': `bench-upload-${i}` },
      )
      await admin.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: driver.id })
      await admin.post(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: pharmacy.id, to: driver.id, signature: 's' })
      deliveries.push(rx.delivery_id)
    }
    const token = await clientCredentialsToken(service.baseUrl, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const size = 5 * 1024 * 1024
    // A JPEG of exactly 5 MiB: SOI, an Exif APP1 (cut by the service), one scan of `fill` bytes, EOI.
    const jpeg = (fill: number) => {
      const image = Buffer.alloc(size, fill)
      image.set([0xff, 0xd8, 0xff, 0xe1, 0x00, 0x08, 0x45, 0x78, 0x69, 0x66, 0x00, 0x00], 0)
      image.set([0xff, 0xda, 0x00, 0x08, 1, 1, 0, 0, 63, 0], 12)
      image.set([0xff, 0xd9], size - 2)
      return image
    }
    const agent = new Agent({ keepAlive: true, maxSockets: count })
    const upload = (deliveryId: string, body: Buffer) =>
      new Promise<number>((resolve, reject) => {
        const url = new URL(`/v1/deliveries/${deliveryId}/attachments`, service.baseUrl)
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: url.pathname,
            method: 'POST',
            agent,
            headers: { authorization: `Bearer ${token}`, 'content-type': 'image/jpeg', 'content-length': body.length },
          },
          (res: IncomingMessage) => {
            res.resume()
            res.on('end', () => resolve(res.statusCode ?? 0))
          },
        )
        req.on('error', reject)
        req.end(body)
      })
    const uploadRound = async (r: number) => {
      // Distinct bytes per upload and round (0x10 + …), so none is deduplicated away.
      const bodies = deliveries.map((_, i) => jpeg(0x10 + ((r * count + i) % 0xe0)))
      const statuses = await Promise.all(deliveries.map((id, i) => upload(id, bodies[i]!)))
      const counted: Record<string, number> = {}
      for (const status of statuses) counted[status] = (counted[status] ?? 0) + 1
      return counted
    }
    const fresh = rssMb(service.pid)
    // One round first, not measured: it fills SQLite's page cache (SQLITE_CACHE_MIB, 64 MiB by
    // default), which a running service holds full anyway; growth is measured from there.
    const warmup = await uploadRound(0)
    log(`uploads warm-up round: ${JSON.stringify(warmup)}; service rss ${fresh} → ${rssMb(service.pid)} MB`)
    const before = rssMb(service.pid)
    const rss = watchRss(service.pid, 100)
    const rounds: { wall_ms: number; statuses: Record<string, number>; peak_rss_mb: number }[] = []
    for (let r = 1; r <= Number(opt.rounds); r++) {
      const started = performance.now()
      const counted = await uploadRound(r)
      rounds.push({ wall_ms: Math.round(performance.now() - started), statuses: counted, peak_rss_mb: rss.peak() })
      log(`uploads round ${r}: ${JSON.stringify(counted)} in ${rounds.at(-1)!.wall_ms} ms; service rss peak ${rss.peak()} MB`)
    }
    const peak = rss.stop()
    agent.destroy()
    const growth = before === null ? null : round(peak - before)
    return {
      uploads_per_round: count,
      rounds: rounds.length,
      bytes_each: size,
      rss_fresh_mb: fresh,
      rss_before_mb: before,
      rss_peak_mb: peak,
      rss_growth_mb: growth,
      target_growth_mb: 64,
      within_target: growth !== null && growth <= 64,
      per_round: rounds,
    }
  } finally {
    await stop()
  }
}

const SECTIONS: Record<string, () => Promise<unknown>> = {
  exceptions: exceptionsSection,
  reconciliation: reconciliationSection,
  positions: () =>
    positionsSection({
      drivers: Number(opt.drivers),
      totes: Number(opt['position-totes']),
      toteRate: Number(opt['tote-rate']),
      seconds: Number(opt['position-seconds']),
      everyS: Number(opt['position-every-s']),
      log,
      startService: startFleetService,
      startPublisher,
    }),
  uploads: uploadsSection,
}

const chosen = opt.sections
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
const unknown = chosen.filter((s) => !(s in SECTIONS))
if (unknown.length) {
  process.stderr.write(`bench:fleet: unknown section(s) ${unknown.join(', ')}; known: ${Object.keys(SECTIONS).join(', ')}\n`)
  process.exit(2)
}
const sections: Record<string, unknown> = {}
for (const name of chosen) {
  log(`section ${name}`)
  sections[name] = await SECTIONS[name]!()
}
process.stdout.write(
  `${JSON.stringify(
    {
      machine: { cpus: cpus().length, model: cpus()[0]?.model, loadavg_1m_at_end: round(loadavg()[0]!, 2), node: process.version },
      date: new Date().toISOString(),
      sections,
    },
    null,
    2,
  )}\n`,
)
