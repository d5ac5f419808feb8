/**
 * `npm run bench:ingest -- --mode external`: the service behind an external Mosquitto
 * (`MQTT_URL`, docs/deployment.md) with 1 and 2 ingest workers, next to the embedded broker, in
 * one run, with one publisher and the same load.
 *
 * Each mode gets a fresh PostgreSQL store (a role and schema of its own, so that two copies share
 * it; the embedded mode uses it too, for a like-for-like CPU figure): entities and readings
 * (`DATABASE_URL` without `QUESTDB_CONFIG` puts the readings in its `readings` table). Totes, cold-chain prescriptions and dispatches are
 * created over HTTP; totes publish single QoS 1 readings at a paced rate (MQTT 3.1.1, as the
 * embedded broker speaks), some of them −2 °C for an immediate `cold-chain.break`.
 *
 * - readings/s: PUBACKed readings over the phase; PUBACK p99: publish → PUBACK at the tote (from
 *   Mosquitto in external mode: accepted by the broker, not yet stored).
 * - reading → event: the break's `created_at` in the outbox minus its publish time.
 * - service CPU per reading: CPU of every service process from the phase's start until every
 *   PUBACKed reading is in the shared `readings` table, over the readings stored. Mosquitto's, the
 *   publisher's and PostgreSQL's (every `postgres` process) are shown apart, and the whole
 *   machine's (the kernel's loopback networking and the bench itself included): on one 2-core
 *   machine they all share the cores.
 */
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import pg from 'pg'
import { startMosquitto, type Mosquitto } from '../../../test/helpers/mosquitto.js'
import type { Phase, PhaseResult } from './ingest-protocol.js'
import { formatSummary, summarize } from './cpuprofile.js'
import { connectProfiler, inspectorUrlFrom } from './ingest-profiler.js'
import { createFixture, freePort, startService, type ServiceChild } from './ingest-service.js'
import { BENCH_ADMIN, benchServiceEnv } from './service-process.js'
import { cpuSeconds, machineBusySeconds, percentile, watchCpuOf, round } from './ingest-stats.js'

export type ExternalOptions = {
  totes: number
  rate: number
  seconds: number
  breaks: number
  databaseUrl: string
  log(line: string): void
  /** The modes to run (default all three); the CPU comparison needs `embedded` among them. */
  modes?: ReadonlySet<string>
  /** Mode names (embedded, external-1-worker, external-2-workers) whose main phase is CPU-profiled, one profile per copy, in this directory. */
  profile?: { modes: ReadonlySet<string>; dir: string }
  /** The publisher of test/bench/ingest.ts (a child process). */
  publisher: {
    child: { pid?: number }
    connect(url: string, totes: { id: string; username: string; password: string }[], subscribeErrors: boolean): Promise<void>
    run(phase: Phase): Promise<PhaseResult>
    disconnect(): Promise<unknown>
  }
}

type Mode = { name: string; workers: number }
const MODES: Mode[] = [
  { name: 'embedded', workers: 0 },
  { name: 'external-1-worker', workers: 1 },
  { name: 'external-2-workers', workers: 2 },
]
// The refrigerated profile's hard_min_c is 0 °C: −2 °C breaks at once.
const BREAK_TEMP_C = -2
const WARMUP_MS = 5_000

/** A role whose search_path is a schema of its own (trust authentication): N copies share it. */
async function ownSchema(url: string) {
  const name = `rx_bench_${randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: url })
  await admin.connect()
  await admin.query(`create role ${name} login`)
  await admin.query(`create schema ${name} authorization ${name}`)
  await admin.query(`alter role ${name} set search_path = ${name}`)
  await admin.end()
  const target = new URL(url)
  target.username = name
  return {
    url: target.toString(),
    async drop() {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      await client.query(`drop schema if exists ${name} cascade`)
      await client.query(`drop role if exists ${name}`)
      await client.end()
    },
  }
}

/** Readings in the mode's shared `readings` table (0 before the migrations created it). */
async function storedCount(client: pg.Client): Promise<number> {
  try {
    return Number((await client.query<{ n: string }>('select count(*) as n from readings')).rows[0]!.n)
  } catch {
    return 0
  }
}

export async function runExternalComparison(options: ExternalOptions) {
  const results: Record<string, unknown> = {}
  const modes = MODES.filter((m) => options.modes?.has(m.name) ?? true)
  for (const mode of modes) results[mode.name] = await runMode(mode, options)
  const embeddedUs = (results.embedded as { service_cpu_us_per_reading: number | null } | undefined)?.service_cpu_us_per_reading
  for (const mode of modes.filter((m) => m.workers > 0)) {
    const r = results[mode.name] as {
      service_cpu_us_per_reading: number | null
      readings_per_s: number
      reading_to_event_p99_ms: number
      cpu_vs_embedded?: number | null
      targets?: object
    }
    r.cpu_vs_embedded = embeddedUs && r.service_cpu_us_per_reading ? round(r.service_cpu_us_per_reading / embeddedUs, 2) : null
    r.targets = {
      at_least_10000_per_s: r.readings_per_s >= 10_000 * 0.99,
      reading_to_event_p99_under_250_ms: r.reading_to_event_p99_ms < 250,
      cpu_per_reading_at_most_1_5x_embedded: r.cpu_vs_embedded === null ? null : r.cpu_vs_embedded <= 1.5,
    }
  }
  return results
}

async function runMode(mode: Mode, options: ExternalOptions) {
  const { log, publisher } = options
  const schema = await ownSchema(options.databaseUrl)
  const broker: Mosquitto | null = mode.workers > 0 ? await startMosquitto() : null
  const copies: { service: ServiceChild; dataDir: string }[] = []
  const profiled = options.profile?.modes.has(mode.name) ?? false
  try {
    const copiesWanted = Math.max(1, mode.workers)
    const secretsKey = randomBytes(32).toString('base64') // copies sharing the database share its key-encryption key
    let mqttUrl = ''
    for (let i = 0; i < copiesWanted; i++) {
      const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-external-'))
      const httpPort = await freePort()
      const env = benchServiceEnv(dataDir, httpPort, {
        DATABASE_URL: schema.url,
        SECRETS_KEY: secretsKey,
        ...(broker ? { MQTT_URL: broker.serviceUrl, MQTT_CLIENT_ID: `rx_bench_${i}` } : { MQTT_PORT: String(await freePort()) }),
      })
      const service = await startService({ env, httpPort, nodeArgs: profiled ? ['--inspect=127.0.0.1:0'] : [] })
      copies.push({ service, dataDir })
      mqttUrl = broker ? `mqtt://127.0.0.1:${broker.port}` : `mqtt://127.0.0.1:${env.MQTT_PORT}`
    }
    log(
      `${mode.name}: ${copies.length} service process(es) ${copies.map((c) => c.service.pid).join(', ')}${broker ? `, mosquitto ${broker.pid} on ${broker.port}` : ''}`,
    )
    const fixture = await createFixture(copies[0]!.service.baseUrl, BENCH_ADMIN, {
      totes: options.totes,
      bound: options.totes,
      onProgress: log,
    })
    const bound = fixture.totes
    await publisher.connect(mqttUrl, bound, true)
    // Every copy watches every open delivery (refreshed every 5 s) and has warmed its caches.
    const warmup = await publisher.run({
      name: `${mode.name}-warmup`,
      durationMs: WARMUP_MS,
      batch: 1,
      window: 4,
      rate: Math.min(options.rate, 5_000),
    })
    // In external mode the broker acknowledges before the copies store: the backlog is gone first.
    const before = await drained(schema.url, warmup.ackedReadings)
    const pids = copies.map((c) => c.service.pid)
    const cpu0 = pids.map(cpuSeconds)
    const brokerCpu0 = broker ? cpuSeconds(broker.pid) : null
    const publisherCpu0 = cpuSeconds(publisher.child.pid!)
    const machineCpu0 = machineBusySeconds()
    const postgresCpu = watchCpuOf('postgres')
    const transactions0 = await committedTransactions(schema.url)
    const durationMs = options.seconds * 1_000
    const breaks = Math.min(options.breaks, bound.length)
    const profilers = profiled ? await Promise.all(copies.map(async (c) => connectProfiler(await inspectorUrlFrom(c.service.output)))) : []
    await Promise.all(profilers.map((p) => p.start()))
    const result = await publisher.run({
      name: mode.name,
      durationMs,
      batch: 1,
      window: 4,
      rate: options.rate,
      breaks: {
        toteIds: bound.slice(0, breaks).map((t) => t.id),
        everyMs: Math.max(1, Math.floor((durationMs - 1_000) / Math.max(1, breaks))),
        tempC: BREAK_TEMP_C,
      },
    })
    const storedAll = await drained(schema.url, before + result.ackedReadings)
    const cpu1 = pids.map(cpuSeconds)
    const machineCpuS = machineBusySeconds() - machineCpu0
    const postgresCpuS = postgresCpu.stop()
    const transactions = (await committedTransactions(schema.url)) - transactions0
    for (const [i, profiler] of profilers.entries()) {
      const file = join(options.profile!.dir, `${mode.name}-copy${i}.cpuprofile`)
      log(`CPU profile of copy ${i} during ${mode.name} (${file}):\n${formatSummary(summarize(await profiler.stop(file), 25)).join('\n')}`)
      profiler.close()
    }
    const serviceCpuS = cpu1.reduce<number>((sum, c, i) => sum + (c ?? 0) - (cpu0[i] ?? 0), 0)
    const brokerCpuS = broker && brokerCpu0 !== null ? (cpuSeconds(broker.pid) ?? 0) - brokerCpu0 : null
    const publisherCpuS = (cpuSeconds(publisher.child.pid!) ?? 0) - (publisherCpu0 ?? 0)
    const stored = storedAll - before
    await publisher.disconnect()

    const events = await breakEvents(schema.url, result.breaks.length)
    const latencies = result.breaks.flatMap((b) => (events.has(b.toteId) ? [events.get(b.toteId)! - b.publishedAtMs] : []))
    // Where that time goes: publish → a copy received the reading (the broker's queue, in external mode), and received → event.
    const received = await breakReceipts(schema.url)
    const toReceipt = result.breaks.flatMap((b) => (received.has(b.toteId) ? [received.get(b.toteId)! - b.publishedAtMs] : []))
    const afterReceipt = result.breaks.flatMap((b) =>
      events.has(b.toteId) && received.has(b.toteId) ? [events.get(b.toteId)! - received.get(b.toteId)!] : [],
    )
    const summary = {
      readings_per_s: round(result.ackedReadings / (result.elapsedMs / 1_000), 0),
      puback_p50_ms: round(result.latency.p50, 2),
      puback_p99_ms: round(result.latency.p99, 2),
      reading_to_event_p50_ms: round(percentile(latencies, 50), 1),
      reading_to_event_p99_ms: round(percentile(latencies, 99), 1),
      reading_to_receipt_p99_ms: round(percentile(toReceipt, 99), 1),
      receipt_to_event_p99_ms: round(percentile(afterReceipt, 99), 1),
      breaks: { published: result.breaks.length, events: latencies.length },
      service_cpu_us_per_reading: stored > 0 ? round((serviceCpuS * 1e6) / stored, 2) : null,
      mosquitto_cpu_us_per_reading: brokerCpuS !== null && stored > 0 ? round((brokerCpuS * 1e6) / stored, 2) : null,
      publisher_cpu_us_per_reading: stored > 0 ? round((publisherCpuS * 1e6) / stored, 2) : null,
      postgres_cpu_us_per_reading: stored > 0 ? round((postgresCpuS * 1e6) / stored, 2) : null,
      machine_cpu_us_per_reading: stored > 0 ? round((machineCpuS * 1e6) / stored, 2) : null,
      postgres_transactions_per_1000_readings: stored > 0 ? round((transactions * 1_000) / stored, 1) : null,
      acked_readings: result.ackedReadings,
      stored,
      errors: result.errors + result.rejected,
      behind: result.behind,
    }
    log(`${mode.name}: ${JSON.stringify(summary)}`)
    return summary
  } finally {
    for (const copy of copies) {
      await copy.service.stop()
      rmSync(copy.dataDir, { recursive: true, force: true })
    }
    await broker?.dispose()
    await schema.drop().catch(() => undefined)
  }
}

/** Waits (at most a minute) until the mode's `readings` table holds `expected` readings; returns the count. */
async function drained(url: string, expected: number): Promise<number> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const deadline = Date.now() + 60_000
    for (;;) {
      const n = await storedCount(client)
      if (n >= expected || Date.now() > deadline) return n
      await new Promise((resolve) => setTimeout(resolve, 100)) // a count(*) of the whole table: not too often
    }
  } finally {
    await client.end()
  }
}

/** Transactions committed in the database so far (every statement outside a transaction is one; the bench's own polls too). */
async function committedTransactions(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ n: string }>('select xact_commit as n from pg_stat_database where datname = current_database()')
    return Number(rows[0]!.n)
  } finally {
    await client.end()
  }
}

/** When a copy received each tote's −2 °C reading (its `received_at`, epoch ms). */
async function breakReceipts(url: string): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ tote_id: string; at: number }>(
      `select tote_id, min(received_at)::float8 as at from readings where temp_c = ${BREAK_TEMP_C} group by tote_id`,
    )
    return new Map(rows.map((r) => [r.tote_id, r.at]))
  } finally {
    await client.end()
  }
}

/** First `cold-chain.break` per tote in the outbox (its created_at, epoch ms), once `expected` totes have one or 20 s have passed. */
async function breakEvents(url: string, expected: number): Promise<Map<string, number>> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const deadline = Date.now() + 20_000
  try {
    for (;;) {
      const { rows } = await client.query<{ created_at: string; data: string }>(
        "select created_at, data from events where type = 'cold-chain.break'",
      )
      const byTote = new Map<string, number>()
      for (const row of rows) {
        const tote = (JSON.parse(row.data) as { tote_id: string }).tote_id
        const at = Date.parse(row.created_at)
        if (!byTote.has(tote) || at < byTote.get(tote)!) byTote.set(tote, at)
      }
      if (byTote.size >= expected || Date.now() > deadline) return byTote
      await new Promise((resolve) => setTimeout(resolve, 200))
    }
  } finally {
    await client.end()
  }
}
