/**
 * bench:history's measurements of one store (the year of history, or the empty one): the service
 * as its own process on the DATA_DIR, exactly as `npm start` runs it, measured from outside.
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

export async function measureStore(store: StoreLocation, m: HistoryManifest, o: MeasureOptions) {
  const { log } = o
  const first = await start(store)
  let service = first.service
  log(`service ready in ${first.readyMs} ms`)
  try {
    const token = await clientCredentialsToken(service.baseUrl, BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const auth = { authorization: `Bearer ${token}` }
    const http = async (name: string, request: LoadRequest, connections = o.connections) => {
      const cpu0 = cpuSeconds(service.child.pid!)
      const figures = await drive({ url: service.baseUrl, connections, seconds: o.httpS, request })
      const cpu1 = cpuSeconds(service.child.pid!)
      const cpuMsPerReq = cpu0 === null || cpu1 === null || !figures.total ? null : round(((cpu1 - cpu0) * 1_000) / figures.total, 3)
      log(
        `${name}: ${figures.rps} rps, p50 ${figures.p50_ms} ms, p99 ${figures.p99_ms} ms, non-2xx ${figures.non2xx}, CPU ${cpuMsPerReq} ms/req`,
      )
      if (figures.non2xx || figures.errors) log(`${name}: ${figures.non2xx} non-2xx answers and ${figures.errors} errors`)
      return {
        p50_ms: figures.p50_ms,
        p99_ms: figures.p99_ms,
        rps: figures.rps,
        n: figures.total,
        errors: figures.errors + figures.non2xx,
        cpu_ms_per_req: cpuMsPerReq,
      }
    }
    const get = (path: string): LoadRequest => ({ method: 'GET', path, headers: auth })
    const api = apiClient(service.baseUrl)
    await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)

    // What a pharmacist, an integration and a fleet's accountant read all day.
    const recent = await api.get<{ data: { id: string }[] }>(`/v1/events?delivery_id=${m.trace!.deliveryId}`)
    const month = { from: new Date(m.nowMs - 30 * DAY_MS).toISOString(), to: new Date(m.nowMs).toISOString() }
    const reads = {
      trace_24h: await http('trace (24 h delivery)', get(`/v1/deliveries/${m.trace!.deliveryId}/temperature`)),
      attention_queue: await http('attention queue, all pharmacies', get('/v1/deliveries?order=attention&limit=50')),
      attention_queue_pharmacy: await http(
        'attention queue, one pharmacy',
        get(`/v1/deliveries?order=attention&limit=50&pharmacy_id=${m.pharmacies[1]}`),
      ),
      event_feed_first_page: await http('event feed, first page', get('/v1/events?limit=100')),
      event_feed_recent_page: await http('event feed, a recent page', get(`/v1/events?limit=100&after=${recent.data[0]!.id}`)),
      reconciliation_month: await http(
        "reconciliation, a fleet's month",
        get(`/v1/fleets/${m.fleets[0]!.id}/reconciliation?from=${encodeURIComponent(month.from)}&to=${encodeURIComponent(month.to)}`),
        2,
      ),
    }

    // Creates as bench:api makes them: a fresh Idempotency-Key each.
    let counter = 0
    const run = `${process.pid}-${Date.now()}`
    const create = await http('POST /v1/prescriptions', {
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
    })

    const ingest = await singles(service, api, m, o)

    // A restart with the live deliveries still open: the cold start a deployment sees.
    await service.stop()
    const second = await start(store)
    service = second.service
    log(`restarted, ready in ${second.readyMs} ms`)
    await endLiveDeliveries(apiClient(service.baseUrl), ingest.deliveries)
    await service.stop()

    const { readings, bytes, entityBytes } = await sizes(store)
    return {
      cold_start_ms: { first: first.readyMs, with_open_deliveries: second.readyMs },
      ...reads,
      creates: create,
      ingest: ingest.figures,
      readings_stored: readings,
      readings_file_bytes: bytes.file,
      readings_bytes_in_use: bytes.used,
      bytes_per_reading: readings ? round(bytes.used / readings, 1) : null,
      entity_store_bytes: entityBytes,
    }
  } finally {
    if (service.child.exitCode === null) await service.stop()
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

/** Service CPU per single reading: live totes with open cold-chain deliveries publishing paced singles over MQTT. */
async function singles(service: ServiceProcess, api: ReturnType<typeof apiClient>, m: HistoryManifest, o: MeasureOptions) {
  const deliveries: string[] = []
  const pharmacyId = m.pharmacies[0]!
  const fleet = m.fleets[0]!
  for (const [i, tote] of m.live.entries()) {
    const rx = await api.post<{ delivery_id: string }>(
      '/v1/prescriptions',
      { patient_id: `pt_live_${i}`, pharmacy_id: pharmacyId, cold_chain: true, temperature_profile: 'refrigerated' },
      { 'idempotency-key': `live-${Date.now()}-${i}` },
    )
    try {
      await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fleet.id, driver_id: fleet.driverIds[0], tote_id: tote.id })
      deliveries.push(rx.delivery_id)
    } catch (error) {
      // A run that stopped half-way left this tote on an open delivery: its readings are bound to that one.
      if (!String(error).includes(' 409 ')) throw error
    }
  }
  const { child, ask } = forkPublisher()
  try {
    const url = await mqttUrl(service.baseUrl)
    const totes: ToteCredentials[] = m.live
    const connected = await ask({ type: 'connect', url, totes, subscribeErrors: true, parallel: 50, wire: 'raw' }, 'connected')
    if (connected.failed) throw new Error(`${connected.failed} live totes could not connect: ${connected.firstError}`)
    await ask({ type: 'run', phase: { name: 'warmup', durationMs: 3_000, batch: 1, window: 4, rate: o.rate } }, 'result')
    const cpu0 = cpuSeconds(service.child.pid!)
    const { result } = await ask(
      { type: 'run', phase: { name: 'singles', durationMs: o.ingestS * 1_000, batch: 1, window: 4, rate: o.rate } },
      'result',
    )
    const cpu1 = cpuSeconds(service.child.pid!)
    await ask({ type: 'disconnect' }, 'disconnected')
    const usPerReading =
      cpu0 === null || cpu1 === null || !result.ackedReadings ? null : round(((cpu1 - cpu0) * 1e6) / result.ackedReadings, 1)
    const figures = {
      ...pubackFigures(result),
      service_cpu_us_per_reading: usPerReading,
      rss_mb: rssMb(service.child.pid!),
      totes: m.live.length,
    }
    o.log(`singles: ${JSON.stringify(figures)}`)
    return { figures, deliveries }
  } finally {
    child.kill('SIGTERM')
  }
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
