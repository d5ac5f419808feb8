/**
 * bench:history's measurements of the year of history and the empty store: each service as its
 * own process on its DATA_DIR, exactly as `npm start` runs it, measured from outside, in turns.
 */
import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { createReadingSink } from '../../../src/timeseries/index.js'
import { clientCredentialsToken } from './api-client.js'
import { apiClient } from './ingest-service.js'
import type { ToteCredentials } from './ingest-protocol.js'
import { cpuSeconds, pubackFigures, round, rssMb } from './ingest-stats.js'
import { drive, type LoadRequest } from './load.js'
import { sqlitePages } from './sqlite-pages.js'
import { forkPublisher } from './publisher-child.js'
import { BENCH_ADMIN, benchServiceEnv, freePort, startServiceProcess, type ServiceProcess } from './service-process.js'
import { postgresServiceEnv, type HistoryManifest } from './history-build.js'
import { postgresBytes, postgresReadings, type PostgresTarget } from './history-postgres.js'

export type MeasureOptions = {
  /** Paced single readings per second over the live totes. */
  rate: number
  ingestS: number
  httpS: number
  connections: number
  log: (line: string) => void
}

/** Where a store is: its data directory and, on PostgreSQL, its schema. */
export type StoreLocation = { dataDir: string; postgres?: PostgresTarget | undefined }

const DAY_MS = 86_400_000

/**
 * The readings storage's bytes on disk (the data directory minus the entity store and its lock,
 * the key and the manifest), and of them those in use: a SQLite file keeps the size it reached and
 * reuses its free pages for the next days' rows, so bytes per stored reading counts the pages in use.
 */
function readingsBytes(dataDir: string): { file: number; used: number } {
  let file = 0
  let free = 0
  const walk = (dir: string, top: boolean) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (top && (entry.name.startsWith('rxtrace.') || entry.name === 'history.json' || entry.name.endsWith('.key'))) continue
      const path = join(dir, entry.name)
      if (entry.isDirectory()) walk(path, false)
      else if (entry.isFile()) {
        file += statSync(path).size
        if (entry.name.endsWith('.db')) {
          const { pageSize, freePages } = sqlitePages(path)
          free += freePages * pageSize
        }
      }
    }
  }
  walk(dataDir, true)
  return { file, used: file - free }
}

const entityStoreBytes = (dataDir: string) =>
  readdirSync(dataDir)
    .filter((name) => name.startsWith('rxtrace.db'))
    .reduce((sum, name) => sum + statSync(join(dataDir, name)).size, 0)

async function start({ dataDir, postgres }: StoreLocation): Promise<{ service: ServiceProcess; readyMs: number }> {
  const port = await freePort()
  const env = { MQTT_PORT: '0', ...(postgres ? postgresServiceEnv(dataDir, postgres) : {}) }
  const t0 = performance.now()
  const service = await startServiceProcess({ env: benchServiceEnv(dataDir, port, env), port })
  return { service, readyMs: round(performance.now() - t0, 0) }
}

/** Where totes connect (MQTT_PORT=0 lets the embedded broker pick a port): the discovery document says. */
async function mqttUrl(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/.well-known/rxtrace.json`)
  const body = (await res.json()) as { mqtt?: { tcp?: string | null } }
  const tcp = body.mqtt?.tcp
  if (!res.ok || !tcp) throw new Error(`GET /.well-known/rxtrace.json: ${res.status}, no MQTT address in ${JSON.stringify(body)}`)
  return tcp
}

/** One store under measurement: its service running, a token, and what its phases ask for. */
type Session = {
  label: string
  location: StoreLocation
  manifest: HistoryManifest
  service: ServiceProcess
  readyMs: number
  reads: Record<ReadPhase, { request: LoadRequest; connections: number }>
  create: LoadRequest
  /** Forked when the readings phase begins, so its start-up is not measured with anything else. */
  publisher: ReturnType<typeof forkPublisher> | null
  liveDeliveries: string[]
}

/** The HTTP reads measured on both stores, in this order. */
export const READ_PHASES = [
  'trace_24h',
  'attention_queue',
  'attention_queue_pharmacy',
  'event_feed_first_page',
  'event_feed_recent_page',
  'reconciliation_month',
] as const
type ReadPhase = (typeof READ_PHASES)[number]

// Latencies are null for a round in which no request completed (a median of them would read 0 ms).
type HttpFigures = { p50_ms: number | null; p99_ms: number | null; rps: number; n: number; errors: number; cpu_ms_per_req: number | null }

// Counted, not measured: a round's errors must show in the figure, so these add up over the rounds.
const SUMMED = new Set(['n', 'errors', 'behind'])

/** A phase's rounds as one figure each: the median of its rounds (counts summed), with each round's beside it. */
type Median<T> = T & { rounds: { [K in keyof T]: T[K][] } }

function medianOfRounds<T extends object>(rounds: T[]): Median<T> {
  const median: Record<string, unknown> = {}
  const each: Record<string, unknown[]> = {}
  for (const key of Object.keys(rounds[0]!)) {
    const values = rounds.map((r) => (r as Record<string, unknown>)[key])
    each[key] = values
    const numbers = values.filter((v): v is number => typeof v === 'number').sort((a, b) => a - b)
    const half = Math.floor(numbers.length / 2)
    if (numbers.length === 0) median[key] = values[0] ?? null
    else if (SUMMED.has(key)) median[key] = numbers.reduce((a, b) => a + b, 0)
    else median[key] = round(numbers.length % 2 ? numbers[half]! : (numbers[half - 1]! + numbers[half]!) / 2, 3)
  }
  return { ...median, rounds: each } as Median<T>
}

/**
 * Measures the empty store and the history in one run, interleaved: both services run side by
 * side, and each phase is measured `rounds` times on each, alternating which store goes first
 * (empty, history; history, empty; …). A figure is the median of its rounds. Measured one store
 * after the other, minutes apart, a ratio also measured whatever the machine's neighbours did
 * in between (runs of the same code differed by up to 30 % that way on a VM with CPU steal).
 */
export async function measureStores(
  empty: { location: StoreLocation; manifest: HistoryManifest },
  history: { location: StoreLocation; manifest: HistoryManifest },
  o: MeasureOptions & { rounds: number },
) {
  const sessions: Session[] = []
  try {
    // Each cold start is the first thing measured on its store (the history's with the empty store's service idle beside it).
    sessions.push(await open('empty', empty.location, empty.manifest, o))
    sessions.push(await open('history', history.location, history.manifest, o))
    const [onEmpty, onHistory] = sessions as [Session, Session]
    // Which store goes first alternates turn by turn, across phases too: with an odd number of
    // rounds, neither goes first in more of them overall.
    let turn = 0
    const inTurn = async <T>(measure: (s: Session) => Promise<T>) => {
      const rounds = new Map<Session, T[]>(sessions.map((s) => [s, []]))
      for (let i = 0; i < o.rounds; i++) {
        for (const s of turn++ % 2 === 0 ? [onEmpty, onHistory] : [onHistory, onEmpty]) rounds.get(s)!.push(await measure(s))
      }
      return rounds
    }
    const reads = {} as Record<ReadPhase, Map<Session, HttpFigures[]>>
    for (const phase of READ_PHASES)
      reads[phase] = await inTurn((s) => http(s, phase, s.reads[phase].request, s.reads[phase].connections, o))
    const creates = await inTurn((s) => http(s, 'creates', s.create, o.connections, o))
    for (const s of sessions) await openLiveDeliveries(s)
    const ingest = await inTurn((s) => singles(s, o))

    // Both stop before either restarts: each restart (the cold start with open deliveries) runs alone.
    for (const s of sessions) await stop(s)
    const results = []
    for (const s of sessions) {
      results.push({
        ...(await restartAndClose(s, o)),
        ...(Object.fromEntries(READ_PHASES.map((phase) => [phase, medianOfRounds(reads[phase].get(s)!)])) as Record<
          ReadPhase,
          Median<HttpFigures>
        >),
        creates: medianOfRounds(creates.get(s)!),
        ingest: { ...medianOfRounds(ingest.get(s)!), totes: s.manifest.live.length },
      })
    }
    return { empty: results[0]!, history: results[1]! }
  } finally {
    await Promise.allSettled(sessions.map((s) => stop(s)))
  }
}

/** Stops a session's publisher and service, whichever are still running. */
async function stop(s: Session): Promise<void> {
  s.publisher?.child.kill('SIGTERM')
  if (s.service.child.exitCode === null) await s.service.stop()
}

/** Starts a store's service (its cold start) and prepares what its phases ask for; stops the service if that fails. */
async function open(label: string, location: StoreLocation, m: HistoryManifest, o: MeasureOptions): Promise<Session> {
  const { service, readyMs } = await start(location)
  o.log(`${label}: service ready in ${readyMs} ms`)
  try {
    const token = await clientCredentialsToken(service.baseUrl, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const auth = { authorization: `Bearer ${token}` }
    const get = (path: string, connections = o.connections) => ({
      request: { method: 'GET', path, headers: auth } as LoadRequest,
      connections,
    })
    const api = apiClient(service.baseUrl)
    await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    // What a pharmacist, an integration and a fleet's accountant read all day.
    const recent = await api.get<{ data: { id: string }[] }>(`/v1/events?delivery_id=${m.trace!.deliveryId}`)
    if (!recent.data[0]) throw new Error(`${label}: the measured delivery has no events`)
    const month = { from: new Date(m.nowMs - 30 * DAY_MS).toISOString(), to: new Date(m.nowMs).toISOString() }
    // Creates as bench:api makes them: a fresh Idempotency-Key each.
    let counter = 0
    const run = `${process.pid}-${Date.now()}`
    return {
      label,
      location,
      manifest: m,
      service,
      readyMs,
      reads: {
        trace_24h: get(`/v1/deliveries/${m.trace!.deliveryId}/temperature`),
        attention_queue: get('/v1/deliveries?order=attention&limit=50'),
        attention_queue_pharmacy: get(`/v1/deliveries?order=attention&limit=50&pharmacy_id=${m.pharmacies[1]}`),
        event_feed_first_page: get('/v1/events?limit=100'),
        event_feed_recent_page: get(`/v1/events?limit=100&after=${recent.data[0].id}`),
        reconciliation_month: get(
          `/v1/fleets/${m.fleets[0]!.id}/reconciliation?from=${encodeURIComponent(month.from)}&to=${encodeURIComponent(month.to)}`,
          2,
        ),
      },
      create: {
        method: 'POST',
        path: '/v1/prescriptions',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({
          patient_id: 'pt_bench_000042',
          cold_chain: true,
          pharmacy_id: m.pharmacies[1],
          temperature_profile: 'refrigerated',
        }),
        setupRequest: (req) => ({ ...req, headers: { ...req.headers, 'idempotency-key': `history-${run}-${++counter}` } }),
      },
      publisher: null,
      liveDeliveries: [],
    }
  } catch (error) {
    await service.stop()
    throw error
  }
}

/** One HTTP phase on one store: latency from the client, the service's CPU per request from /proc. */
async function http(s: Session, name: string, request: LoadRequest, connections: number, o: MeasureOptions): Promise<HttpFigures> {
  const cpu0 = cpuSeconds(s.service.child.pid!)
  const figures = await drive({ url: s.service.baseUrl, connections, seconds: o.httpS, request })
  const cpu1 = cpuSeconds(s.service.child.pid!)
  const cpuMsPerReq = cpu0 === null || cpu1 === null || !figures.total ? null : round(((cpu1 - cpu0) * 1_000) / figures.total, 3)
  o.log(
    `${s.label} ${name}: ${figures.rps} rps, p50 ${figures.p50_ms} ms, p99 ${figures.p99_ms} ms, non-2xx ${figures.non2xx}, CPU ${cpuMsPerReq} ms/req`,
  )
  if (figures.non2xx || figures.errors) o.log(`${s.label} ${name}: ${figures.non2xx} non-2xx answers and ${figures.errors} errors`)
  return {
    p50_ms: figures.total ? figures.p50_ms : null,
    p99_ms: figures.total ? figures.p99_ms : null,
    rps: figures.rps,
    n: figures.total,
    errors: figures.errors + figures.non2xx,
    cpu_ms_per_req: cpuMsPerReq,
  }
}

/** A restart with the live deliveries still open (the cold start a deployment sees), then their end, the stop and the sizes. */
async function restartAndClose(s: Session, o: MeasureOptions) {
  const second = await start(s.location)
  s.service = second.service
  o.log(`${s.label}: restarted, ready in ${second.readyMs} ms`)
  await endLiveDeliveries(apiClient(s.service.baseUrl), s.liveDeliveries)
  await s.service.stop()
  const { readings, bytes, entityBytes } = await sizes(s.location)
  return {
    cold_start_ms: { first: s.readyMs, with_open_deliveries: second.readyMs },
    readings_stored: readings,
    readings_file_bytes: bytes.file,
    readings_bytes_in_use: bytes.used,
    bytes_per_reading: readings ? round(bytes.used / readings, 1) : null,
    entity_store_bytes: entityBytes,
  }
}

/** Readings stored, their bytes on disk and in use, and the entity store's bytes. */
async function sizes({ dataDir, postgres }: StoreLocation) {
  if (!postgres) {
    const sink = await createReadingSink({ dataDir })
    const readings = await sink.count()
    await sink.close()
    return { readings, bytes: readingsBytes(dataDir), entityBytes: entityStoreBytes(dataDir) }
  }
  // A table's pages in use are its pages: PostgreSQL reuses a table's free space for that table alone.
  const pg = await postgresBytes(postgres)
  return { readings: await postgresReadings(postgres), bytes: { file: pg.readings, used: pg.readings }, entityBytes: pg.entities }
}

/** Opens a cold-chain delivery on each live tote and connects the totes (idle until a round publishes). */
async function openLiveDeliveries(s: Session): Promise<void> {
  const api = apiClient(s.service.baseUrl)
  await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
  const pharmacyId = s.manifest.pharmacies[0]!
  const fleet = s.manifest.fleets[0]!
  for (const [i, tote] of s.manifest.live.entries()) {
    const rx = await api.post<{ delivery_id: string }>(
      '/v1/prescriptions',
      { patient_id: `pt_live_${i}`, pharmacy_id: pharmacyId, cold_chain: true, temperature_profile: 'refrigerated' },
      { 'idempotency-key': `live-${Date.now()}-${i}` },
    )
    try {
      await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: fleet.driverIds[0], tote_id: tote.id })
      s.liveDeliveries.push(rx.delivery_id)
    } catch (error) {
      // A run that stopped half-way left this tote on an open delivery: its readings are bound to that one.
      if (!String(error).includes(' 409 ')) throw error
    }
  }
  const url = await mqttUrl(s.service.baseUrl)
  const totes: ToteCredentials[] = s.manifest.live
  s.publisher = forkPublisher()
  const connected = await s.publisher.ask({ type: 'connect', url, totes, subscribeErrors: true, parallel: 50, wire: 'raw' }, 'connected')
  if (connected.failed) throw new Error(`${connected.failed} live totes could not connect: ${connected.firstError}`)
}

/** One round of service CPU per single reading: the live totes publish paced singles over MQTT. */
async function singles(s: Session, o: MeasureOptions) {
  const publisher = s.publisher!
  await publisher.ask({ type: 'run', phase: { name: 'warmup', durationMs: 3_000, batch: 1, window: 4, rate: o.rate } }, 'result')
  const cpu0 = cpuSeconds(s.service.child.pid!)
  const { result } = await publisher.ask(
    { type: 'run', phase: { name: 'singles', durationMs: o.ingestS * 1_000, batch: 1, window: 4, rate: o.rate } },
    'result',
  )
  const cpu1 = cpuSeconds(s.service.child.pid!)
  const usPerReading =
    cpu0 === null || cpu1 === null || !result.ackedReadings ? null : round(((cpu1 - cpu0) * 1e6) / result.ackedReadings, 1)
  const figures = { ...pubackFigures(result), service_cpu_us_per_reading: usPerReading, rss_mb: rssMb(s.service.child.pid!) }
  o.log(`${s.label} singles: ${JSON.stringify(figures)}`)
  return figures
}

/** Ends the live deliveries (pickup, deliver), so a --skip-build run after this one starts from the same store. */
async function endLiveDeliveries(api: ReturnType<typeof apiClient>, deliveries: string[]) {
  await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
  for (const id of deliveries) {
    const d = await api.get<{ pharmacy_id: string; driver_id: string }>(`/v1/deliveries/${id}`)
    await api.post(`/v1/deliveries/${id}/pickup`, { from: d.pharmacy_id, to: d.driver_id, signature: 'signed' })
    await api.post(`/v1/deliveries/${id}/deliver`, { verification: { method: 'otp', evidence: '1' } })
  }
}
