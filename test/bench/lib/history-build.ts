/**
 * bench:history's store builder: a pharmacy chain's year in one DATA_DIR (SQLite entity store and
 * whatever readings storage the time-series port has), written without MQTT.
 *
 * 1. entities: pharmacies, fleets with two drivers each, five totes per pharmacy and the live
 *    totes the measurements publish with, through the service's own routes (in-process).
 * 2. templates: four delivery lifecycles through the same routes (history-templates.ts).
 * 3. deliveries: copies of the templates spread over the year, in transactions of COPIES_PER_TX.
 * 4. readings: one every --reading-every-s of each cold-chain delivery's binding interval, through
 *    the ReadingSink's `write` in batches of READINGS_PER_WRITE.
 * 5. trace: a 24 h cold-chain delivery that ended an hour ago, a reading every 10 s: the trace measured.
 *
 * Each phase records itself in `history.json` in the data dir (deliveries also in the store, in
 * the transaction that writes them): a build that stops is resumed by running it again.
 */
import Database from 'better-sqlite3'
import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { loadConfig } from '../../../src/config.js'
import { buildService } from '../../../src/service.js'
import { createReadingSink, type ReadingRow, type ReadingSink } from '../../../src/timeseries/index.js'
import { createPostgresSink } from '../../../src/timeseries/postgres-sink.js'
import { createSqliteSink } from '../../../src/timeseries/sqlite-sink.js'
import { mulberry32 } from '../../helpers/prng.js'
import { TEST_ENV, withApi } from '../../helpers/service.js'
import { testClock } from '../../helpers/clock.js'
import type { ToteCredentials } from './ingest-protocol.js'
import { BENCH_ADMIN } from './service-process.js'
import {
  postgresCopyColumns,
  postgresMarks,
  postgresPool,
  postgresRowsSince,
  prepareSchema,
  serviceUrl,
  TableRows,
  type PostgresTarget,
} from './history-postgres.js'
import {
  NOT_COPIED,
  rowidMarks,
  rowsSince,
  templateCopier,
  templateCopies,
  type CapturedRows,
  type Template,
  type Tenancy,
} from './history-templates.js'

const DAY_MS = 86_400_000
const HOUR_MS = 3_600_000
/** The full chain (--scale 1): the issue's 2,000 pharmacies and a million ended deliveries in the year. */
const FULL = { pharmacies: 2_000, deliveries: 1_000_000 }
/**
 * The "empty" store is not quite empty: it holds the day before the measured trace, so the pages
 * measured on both stores are full pages (50 deliveries in the queue, 100 events), and only the
 * history differs.
 */
const EMPTY_STORE_DELIVERIES = 200
const PHARMACIES_PER_FLEET = 20
const TOTES_PER_PHARMACY = 5
// Big enough that a commit is a small part of a transaction, small enough to report progress every few seconds.
const COPIES_PER_TX = 2_000
const READINGS_PER_WRITE = 20_000
// The measured trace: 24 h at a reading every 10 s (8,640 readings).
const TRACE_STEP_MS = 10_000

/** What history.json holds: the build's progress and what the measurements need. */
export type HistoryManifest = {
  scale: number
  /** On PostgreSQL, the schema the store is in (none: SQLite in the data directory). */
  schema?: string
  /** The store compared with the history: entities, the measured trace and a day of deliveries. */
  emptyOnly?: boolean
  readingEveryS: number
  nowMs: number
  pharmacies: string[]
  fleets: { id: string; driverIds: string[] }[]
  /** Per pharmacy, its totes (ids). */
  totes: string[][]
  live: ToteCredentials[]
  templates?: { name: string; weight: number }[]
  deliveries?: { done: number; total: number; seconds: number }
  readings?: { deliveriesDone: number; written: number; seconds: number; complete: boolean }
  trace?: { deliveryId: string; fromMs: number; toMs: number; readings: number }
  /** Every day before the build's last is compacted, as a running service keeps it (SQLite). */
  compacted?: boolean
  /** Every table vacuumed and analyzed, as autovacuum keeps a year-old database (PostgreSQL). */
  vacuumed?: boolean
  phaseSeconds: Record<string, number>
}

const manifestPath = (dataDir: string) => join(dataDir, 'history.json')
/** The data directory's manifest, if it has one; refused when it was built on another store than `schema` names (none: SQLite). */
export function readManifest(dataDir: string, schema: string | undefined): HistoryManifest | null {
  if (!existsSync(manifestPath(dataDir))) return null
  const m = JSON.parse(readFileSync(manifestPath(dataDir), 'utf8')) as HistoryManifest
  if (m.schema !== schema)
    throw new Error(
      `${dataDir} holds a build ${m.schema ? `in schema ${m.schema} (give --database-url and --schema)` : 'on SQLite (leave out --database-url)'}`,
    )
  return m
}
const saveManifest = (dataDir: string, m: HistoryManifest) => writeFileSync(manifestPath(dataDir), JSON.stringify(m, null, 1))

/**
 * What the service needs beside DATA_DIR for a store on PostgreSQL: DATABASE_URL in the store's
 * schema, and a key-encryption key, kept in the data directory with the manifest (made once).
 */
export function postgresServiceEnv(dataDir: string, target: PostgresTarget): Record<string, string> {
  const keyFile = join(dataDir, 'postgres-secrets.key')
  if (!existsSync(keyFile)) writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 })
  return { DATABASE_URL: serviceUrl(target), SECRETS_KEY_FILE: keyFile }
}

const BUILD_ENV = {
  ...TEST_ENV,
  ...(process.env.BENCH_LOG_LEVEL ? { LOG_LEVEL: process.env.BENCH_LOG_LEVEL } : {}),
  ADMIN_CLIENT_ID: BENCH_ADMIN.id,
  ADMIN_CLIENT_SECRET: BENCH_ADMIN.secret,
}
const ADDRESS = { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' }

type Lifecycle = { name: string; weight: number; coldChain: boolean; steps: ('pickup' | 'deliver' | 'fail' | 'return')[] }
// A chain's mix: most deliveries arrive, a few fail at the door, some of those go back to the pharmacy.
const LIFECYCLES: Lifecycle[] = [
  { name: 'cold-chain-delivered', weight: 45, coldChain: true, steps: ['pickup', 'deliver'] },
  { name: 'delivered', weight: 40, coldChain: false, steps: ['pickup', 'deliver'] },
  { name: 'cold-chain-returned', weight: 10, coldChain: true, steps: ['pickup', 'fail', 'return'] },
  { name: 'returned', weight: 5, coldChain: false, steps: ['pickup', 'fail', 'return'] },
]
// Dispatch → pickup → the end: a two-hour round, the binding interval of a cold-chain delivery.
const PICKUP_AFTER_MS = 10 * 60_000
const END_AFTER_MS = 2 * HOUR_MS

export async function buildHistory({
  dataDir,
  postgres,
  scale,
  readingEveryS,
  liveTotes,
  emptyOnly = false,
  log,
}: {
  dataDir: string
  /** The store on PostgreSQL, in this schema (none: SQLite in `dataDir`). A build without a manifest starts the schema afresh. */
  postgres?: PostgresTarget
  /** 1 = the full chain; 0 = entities and the measured trace only (the empty store). */
  scale: number
  readingEveryS: number
  liveTotes: number
  /** The same entities and measured trace, and a day of deliveries instead of a year: the store the history is compared with. */
  emptyOnly?: boolean
  log: (line: string) => void
}): Promise<HistoryManifest> {
  let manifest = readManifest(dataDir, postgres?.schema)
  if (manifest && (manifest.scale !== scale || manifest.readingEveryS !== readingEveryS))
    throw new Error(
      `${dataDir} holds a build at --scale ${manifest.scale} --reading-every-s ${manifest.readingEveryS}; use another --data-dir`,
    )
  if (postgres) await prepareSchema(postgres, !manifest)
  const phase = async (name: string, run: () => Promise<void>) => {
    const t0 = Date.now()
    await run()
    manifest!.phaseSeconds[name] = Math.round((Date.now() - t0) / 100) / 10 + (manifest!.phaseSeconds[name] ?? 0)
    saveManifest(dataDir, manifest!)
    log(`${name}: done in ${manifest!.phaseSeconds[name]} s`)
  }
  const nowMs = manifest?.nowMs ?? Date.now()
  const clock = testClock(nowMs)
  const env = postgres ? postgresServiceEnv(dataDir, postgres) : {}
  const service = await buildService(loadConfig({ ...BUILD_ENV, DATA_DIR: dataDir, ...env }), { clock })
  const api = withApi(service)
  const engine = postgres ? postgresEngine(postgres) : sqliteEngine(dataDir)
  try {
    if (!manifest) {
      manifest = {
        scale,
        ...(postgres ? { schema: postgres.schema } : {}),
        emptyOnly,
        readingEveryS,
        nowMs,
        pharmacies: [],
        fleets: [],
        totes: [],
        live: [],
        phaseSeconds: {},
      }
      await phase('entities', () => createEntities(api, manifest!, liveTotes, log))
    }
    const m = manifest
    const templates: Template[] = []
    const deliveriesTotal = emptyOnly ? EMPTY_STORE_DELIVERIES : Math.round(FULL.deliveries * scale)
    if (deliveriesTotal > 0 && (!m.deliveries || m.deliveries.done < m.deliveries.total)) {
      // Template rows are read back from the store, so they are made (again) on every resumed run.
      clock.set(nowMs - 400 * DAY_MS) // before the year, so the templates' own rows stay out of it
      // A tote of their own, new on every run: a resumed build's history already binds the others
      // later than the templates' time, and a tote is not dispatched before its later trips.
      const token = await api.tokenFor(BENCH_ADMIN.id, BENCH_ADMIN.secret)
      const tote = await api.post<{ id: string }>('/v1/totes', token, { serial: `template-${Date.now()}`, fleet_id: m.fleets[0]!.id })
      if (tote.status !== 201) throw new Error(`template tote: ${tote.status} ${tote.text}`)
      for (const lifecycle of LIFECYCLES) {
        const rowsOf = await engine.capture()
        const t = await runLifecycle(api, m, lifecycle, clock, tote.body.id)
        await service.audit.flush()
        templates.push({ ...t, name: lifecycle.name, rows: await rowsOf() })
        log(
          `template ${lifecycle.name}: ${Object.entries(templates.at(-1)!.rows)
            .map(([table, rows]) => `${table} ${rows.length}`)
            .join(', ')}`,
        )
        clock.advance(DAY_MS)
      }
      m.templates = LIFECYCLES.map(({ name, weight }) => ({ name, weight }))
      clock.set(nowMs)
    }
    // The measured 24 h delivery, made while the service is up: it goes through the routes.
    if (!m.trace) await phase('trace', async () => void (m.trace = await traceDelivery(api, m, clock, service.sink)))
    await service.stop()

    if (templates.length) {
      m.deliveries ??= { done: 0, total: deliveriesTotal, seconds: 0 }
      await phase('deliveries', () => copyDeliveries(engine, m, templates, () => saveManifest(dataDir, m), log))
    }
    if (deliveriesTotal > 0 && !m.readings?.complete) {
      m.readings ??= { deliveriesDone: 0, written: 0, seconds: 0, complete: false }
      await phase('readings', () => writeReadings(engine, m, () => saveManifest(dataDir, m), log))
    }
    if (postgres) {
      if (!m.vacuumed) await phase('vacuum', () => vacuumAll(postgres, m, log))
    } else if (!m.compacted) await phase('compaction', () => compactAll(dataDir, m, log))
    saveManifest(dataDir, m)
    return m
  } finally {
    await service.stop().catch(() => {})
    await engine.close()
  }
}

/** A cold-chain delivery's binding, whose readings the build writes. */
type BoundDelivery = { id: string; rx_id: string; tote_id: string; bound_from: string; bound_to: string }

/** Where the build writes, and how: the parts that differ between SQLite and PostgreSQL. */
type BuildEngine = {
  /** Marks the store now; the function returned gives the rows written since. */
  capture(): Promise<() => Promise<CapturedRows>>
  /** Writes copies of the templates: `write(copies, done)` writes them and records `done` copies as made, in one transaction. */
  copier(templates: Template[], fixed: (t: Template) => Tenancy, nowMs: number): Promise<CopyWriter>
  /** Ended cold-chain deliveries but `exceptId`, in binding order, from the `offset`-th. */
  boundDeliveries(exceptId: string, offset: number): Promise<Iterable<BoundDelivery>>
  sink(): Promise<ReadingSink>
  close(): Promise<void>
}
/** One copy: of the `which`-th template, starting at `startMs`, for `tenancy`. */
type PlannedCopy = { which: number; startMs: number; tenancy: Tenancy }
type CopyWriter = {
  /** Copies done by earlier runs. */
  done: number
  write(copies: readonly PlannedCopy[], done: number): Promise<void>
  close(): Promise<void>
}

const BOUND_DELIVERIES = `select id, rx_id, tote_id, bound_from, bound_to from deliveries
  where tote_id is not null and bound_to is not null and id <> $1 order by bound_from, id`

function sqliteEngine(dataDir: string): BuildEngine {
  // One connection of the build's own, beside the in-process service's while the templates are made.
  let handle: Database.Database | null = null
  const db = () => (handle ??= new Database(join(dataDir, 'rxtrace.db')))
  return {
    async capture() {
      const marks = rowidMarks(db())
      return async () => rowsSince(db(), marks)
    },
    async copier(templates, fixed, nowMs) {
      const raw = db()
      raw.pragma('journal_mode = WAL')
      raw.pragma('synchronous = NORMAL')
      raw.exec('create table if not exists bench_history_progress (k text primary key, v integer not null)')
      const done = (raw.prepare(`select v from bench_history_progress where k = 'deliveries'`).get() as { v: number } | undefined)?.v ?? 0
      const progress = raw.prepare(
        `insert into bench_history_progress (k, v) values ('deliveries', ?) on conflict (k) do update set v = excluded.v`,
      )
      const copiers = templates.map((t) => templateCopier(raw, t, fixed(t), nowMs))
      const batch = raw.transaction((copies: readonly PlannedCopy[], done: number) => {
        for (const c of copies) copiers[c.which]!(c.startMs, c.tenancy)
        progress.run(done)
      })
      return { done, write: async (copies, done) => batch(copies, done), close: async () => {} }
    },
    async boundDeliveries(exceptId, offset) {
      return db()
        .prepare(`${BOUND_DELIVERIES.replace('$1', '?')} limit -1 offset ?`)
        .iterate(exceptId, offset) as IterableIterator<BoundDelivery>
    },
    sink: () => createReadingSink({ dataDir }),
    async close() {
      handle?.close()
    },
  }
}

function postgresEngine(target: PostgresTarget): BuildEngine {
  const pool = postgresPool(target)
  return {
    async capture() {
      const marks = await postgresMarks(pool, NOT_COPIED)
      return () => postgresRowsSince(pool, marks)
    },
    async copier(templates, fixed, nowMs) {
      await pool.query('create table if not exists bench_history_progress (k text primary key, v bigint not null)')
      const done = Number((await pool.query(`select v from bench_history_progress where k = 'deliveries'`)).rows[0]?.v ?? 0)
      const columns = await postgresCopyColumns(pool, [...new Set(templates.flatMap((t) => Object.keys(t.rows)))])
      const copies = templates.map((t) => templateCopies(t, fixed(t), nowMs, columns))
      const rows = new TableRows(columns)
      const client = await pool.connect()
      return {
        done,
        async write(planned, done) {
          for (const c of planned) copies[c.which]!(c.startMs, c.tenancy, rows.add)
          await client.query('begin')
          try {
            await rows.flush(client)
            await client.query(
              `insert into bench_history_progress (k, v) values ('deliveries', $1) on conflict (k) do update set v = excluded.v`,
              [done],
            )
            await client.query('commit')
          } catch (error) {
            await client.query('rollback')
            throw error
          }
        },
        close: async () => client.release(),
      }
    },
    async boundDeliveries(exceptId, offset) {
      // Half a million small rows: read at once (a cursor would keep a transaction open for the whole phase).
      return (await pool.query<BoundDelivery>(`${BOUND_DELIVERIES} offset $2`, [exceptId, offset])).rows
    },
    sink: async () => createPostgresSink({ url: target.url, schema: target.schema }),
    close: () => pool.end(),
  }
}

type Api = ReturnType<typeof withApi>

/**
 * 5. compaction: the service packs each past day of readings into chunks a minute at a time as
 * it runs (sqlite-compaction.ts); the year is measured as a running service holds it, not with a
 * year of backlog for the measured service to pack in the background.
 */
async function compactAll(dataDir: string, m: HistoryManifest, log: (line: string) => void): Promise<void> {
  const sink = createSqliteSink({ path: join(dataDir, 'readings.db'), compaction: false })
  try {
    const started = Date.now()
    let packed = 0
    let passes = 0
    for (;;) {
      const pass = await sink.compact({ nowMs: m.nowMs, maxReadings: 200_000 })
      packed += pass.readings
      if (!pass.more) break
      if (++passes % 100 === 0) log(`compaction: ${packed} readings packed (${Math.round(packed / ((Date.now() - started) / 1_000))}/s)`)
    }
    m.compacted = true
    log(`compaction: ${packed} readings packed`)
  } finally {
    await sink.close()
  }
}

/**
 * 5. vacuum (PostgreSQL): autovacuum would otherwise spend the first minutes of the measurement
 * vacuuming and analyzing tables that just had millions of rows inserted; a year-old database
 * has long had that done.
 */
async function vacuumAll(target: PostgresTarget, m: HistoryManifest, log: (line: string) => void): Promise<void> {
  const pool = postgresPool(target, 1)
  try {
    const { rows } = await pool.query<{ name: string }>(
      `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = current_schema() and c.relkind in ('r', 'p') and not c.relispartition`,
    )
    // The partitioned readings table takes its partitions with it.
    await pool.query(`vacuum (analyze) ${rows.map((r) => `"${r.name}"`).join(', ')}`)
    m.vacuumed = true
    log('vacuum: every table vacuumed and analyzed')
  } finally {
    await pool.end()
  }
}

async function createEntities(api: Api, m: HistoryManifest, liveTotes: number, log: (line: string) => void): Promise<void> {
  const token = await api.tokenFor(BENCH_ADMIN.id, BENCH_ADMIN.secret)
  const pharmacies = Math.max(2, Math.round(FULL.pharmacies * m.scale))
  const post = async <T>(path: string, body: unknown): Promise<T> => {
    const res = await api.post<T>(path, token, body)
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${res.text}`)
    return res.body
  }
  for (let f = 0; f < Math.ceil(pharmacies / PHARMACIES_PER_FLEET); f++) {
    const fleet = await post<{ id: string }>('/v1/fleets', { name: `Couriers ${f}` })
    const driverIds = []
    for (const name of ['Dana Driver', 'Sam Second'])
      driverIds.push((await post<{ id: string }>(`/v1/fleets/${fleet.id}/drivers`, { name })).id)
    m.fleets.push({ id: fleet.id, driverIds })
  }
  const started = Date.now()
  for (let p = 0; p < pharmacies; p++) {
    m.pharmacies.push(
      (await post<{ id: string }>('/v1/pharmacies', { name: `Pharmacy ${p}`, address: ADDRESS, timezone: 'America/Chicago' })).id,
    )
    const fleetId = m.fleets[Math.floor(p / PHARMACIES_PER_FLEET)]!.id
    const totes = []
    for (let t = 0; t < TOTES_PER_PHARMACY; t++)
      totes.push((await post<{ id: string }>('/v1/totes', { serial: `p${p}-t${t}`, fleet_id: fleetId })).id)
    m.totes.push(totes)
    if ((p + 1) % 200 === 0)
      log(`entities: ${p + 1} of ${pharmacies} pharmacies with their totes (${Math.round((Date.now() - started) / 1_000)} s)`)
  }
  for (let i = 0; i < liveTotes; i++) {
    const tote = await post<{ id: string; mqtt: { username: string; password: string } }>('/v1/totes', {
      serial: `live-${i}`,
      fleet_id: m.fleets[0]!.id,
    })
    m.live.push({ id: tote.id, username: tote.mqtt.username, password: tote.mqtt.password })
  }
}

async function runLifecycle(
  api: Api,
  m: HistoryManifest,
  lifecycle: Lifecycle,
  clock: ReturnType<typeof testClock>,
  templateToteId: string,
): Promise<Omit<Template, 'name' | 'rows'>> {
  const startMs = clock.now()
  const pharmacyId = m.pharmacies[0]!
  const { id: fleetId, driverIds } = m.fleets[0]!
  const toteId = lifecycle.coldChain ? templateToteId : null
  // A token per call: the lifecycle spans hours of the clock, longer than a token lives.
  const call = async (path: string, body: unknown, headers?: Record<string, string>) => {
    const res = await api.post(path, await api.tokenFor(BENCH_ADMIN.id, BENCH_ADMIN.secret), body, headers)
    if (res.status >= 300) throw new Error(`template ${lifecycle.name}: POST ${path}: ${res.status} ${res.text}`)
    return res.body as { delivery_id: string }
  }
  // A key in the id form, so each copy gets its own (history-templates.ts maps every id).
  const rx = await call(
    '/v1/prescriptions',
    {
      patient_id: 'pt_history_0001',
      pharmacy_id: pharmacyId,
      cold_chain: lifecycle.coldChain,
      ...(lifecycle.coldChain ? { temperature_profile: 'refrigerated' } : {}),
      delivery_address: ADDRESS,
      items: [{ description: 'Insulin glargine 100 units/mL, 3 mL pen', ndc: '0088-2220-33', quantity: 5 }],
    },
    // Unique to this run (wall time, and the lifecycle): a resumed build makes its templates again.
    {
      'idempotency-key': `ik_${'0'.repeat(10)}${String(Date.now() * 10 + LIFECYCLES.indexOf(lifecycle)).padStart(16, '0')}`.slice(0, 29),
    },
  )
  const id = rx.delivery_id
  clock.advance(60_000)
  const dispatchedMs = clock.now()
  await call(`/v1/deliveries/${id}/dispatch`, { fleet_id: fleetId, driver_id: driverIds[0], ...(toteId ? { tote_id: toteId } : {}) })
  let endedMs = dispatchedMs
  for (const step of lifecycle.steps) {
    if (step === 'pickup') {
      clock.set(dispatchedMs + PICKUP_AFTER_MS)
      await call(`/v1/deliveries/${id}/pickup`, { from: pharmacyId, to: driverIds[0], signature: 'signed by Dana' })
    } else if (step === 'deliver' || step === 'fail') {
      clock.set(dispatchedMs + END_AFTER_MS)
      endedMs = clock.now()
      await call(
        `/v1/deliveries/${id}/${step}`,
        step === 'deliver'
          ? { verification: { method: 'otp', evidence: '482913' } }
          : { reason: 'patient_unavailable', note: 'nobody home' },
      )
    } else {
      clock.advance(HOUR_MS)
      endedMs = clock.now()
      await call(`/v1/deliveries/${id}/return`, { from: driverIds[0], to: pharmacyId, signature: 'signed by the pharmacist' })
    }
  }
  return { startMs, toteId, bound: toteId ? { fromMs: dispatchedMs - startMs, toMs: endedMs - startMs } : null }
}

/**
 * The tote of a pharmacy's trips: its own, except that the live totes (those the measurements
 * publish with) take the trips of the first pharmacies' totes, so that the totes measured carry a
 * year of trips like every other.
 */
function yearTote(m: HistoryManifest, pharmacy: number, nth: number): string {
  return m.live[pharmacy * TOTES_PER_PHARMACY + nth]?.id ?? m.totes[pharmacy]![nth]!
}

/** The year's deliveries: template copies, spread evenly over it with a little jitter, oldest first. */
async function copyDeliveries(
  engine: BuildEngine,
  m: HistoryManifest,
  templates: Template[],
  save: () => void,
  log: (line: string) => void,
) {
  const fixed = (t: Template): Tenancy => ({
    pharmacyId: m.pharmacies[0]!,
    fleetId: m.fleets[0]!.id,
    driverIds: m.fleets[0]!.driverIds,
    toteId: t.toteId,
  })
  const writer = await engine.copier(templates, fixed, m.nowMs)
  const d = m.deliveries!
  const stored = writer.done
  d.done = stored
  const pharmacyCount = m.pharmacies.length
  const weights = m.templates!.map((t) => t.weight)
  const totalWeight = weights.reduce((a, b) => a + b, 0)
  const days = m.emptyOnly ? 1 : 365
  const yearStart = m.nowMs - (days + 2) * DAY_MS
  const spacing = (days * DAY_MS) / d.total
  const toteTurn = new Map<number, number>()
  const plan = (k: number): PlannedCopy => {
    const random = mulberry32(k + 1) // the same copy whichever run writes it
    let pick = random() * totalWeight
    let which = 0
    while (pick >= weights[which]!) pick -= weights[which++]!
    const template = templates[which]!
    const p = k % pharmacyCount
    const fleet = m.fleets[Math.floor(p / PHARMACIES_PER_FLEET)]!
    let toteId: string | null = null
    if (template.toteId) {
      const turn = toteTurn.get(p) ?? Math.floor(random() * TOTES_PER_PHARMACY)
      toteId = yearTote(m, p, turn % TOTES_PER_PHARMACY)
      toteTurn.set(p, turn + 1)
    }
    const startMs = Math.floor(yearStart + k * spacing + random() * spacing)
    return { which, startMs, tenancy: { pharmacyId: m.pharmacies[p]!, fleetId: fleet.id, driverIds: fleet.driverIds, toteId } }
  }
  const started = Date.now()
  try {
    while (d.done < d.total) {
      const to = Math.min(d.total, d.done + COPIES_PER_TX)
      const copies: PlannedCopy[] = []
      for (let k = d.done; k < to; k++) copies.push(plan(k))
      await writer.write(copies, to)
      const rate = (to - stored) / Math.max(0.001, (Date.now() - started) / 1_000)
      d.done = to
      save()
      if (to % (COPIES_PER_TX * 10) === 0 || to === d.total)
        log(`deliveries: ${to} of ${d.total} (${Math.round(rate)}/s, ~${Math.round((d.total - to) / rate)} s left)`)
    }
  } finally {
    await writer.close()
  }
}

/** Readings of every ended cold-chain delivery's binding interval, oldest delivery first. */
async function writeReadings(engine: BuildEngine, m: HistoryManifest, save: () => void, log: (line: string) => void) {
  const sink = await engine.sink()
  const r = m.readings!
  const every = m.readingEveryS * 1_000
  const deliveries = await engine.boundDeliveries(m.trace?.deliveryId ?? '', r.deliveriesDone)
  const started = Date.now()
  const writtenBefore = r.written
  let rows: ReadingRow[] = []
  let seen = r.deliveriesDone
  let lastLog = Date.now()
  // One write in flight while the next batch is made and sent: the database's work overlaps the
  // bench's (~1.7× the readings a second on PostgreSQL). Progress is recorded in write order.
  let previous: Promise<void> = Promise.resolve()
  const flush = async () => {
    if (!rows.length) return
    const batch = rows
    const deliveriesDone = seen
    rows = []
    const written = sink.write(batch)
    written.catch(() => {}) // awaited below, after the write before it
    await previous
    previous = written.then(() => {
      r.written += batch.length
      r.deliveriesDone = deliveriesDone
      save()
      if (Date.now() - lastLog > 10_000) {
        lastLog = Date.now()
        const rate = (r.written - writtenBefore) / ((Date.now() - started) / 1_000)
        log(`readings: ${r.written} written, ${deliveriesDone} deliveries (${Math.round(rate)}/s)`)
      }
    })
  }
  try {
    for (const d of deliveries) {
      const random = mulberry32(seen + 7)
      const from = Date.parse(d.bound_from)
      const to = Date.parse(d.bound_to)
      for (let ts = from; ts < to; ts += every) {
        rows.push({
          tote_id: d.tote_id,
          delivery_id: d.id,
          rx_id: d.rx_id,
          ts,
          temp_c: Math.round((4 + random() * 3) * 10) / 10,
          battery: 0.8,
          humidity: null,
          lat: null,
          lng: null,
          seq: null,
          received_at: ts + 150,
          late: false,
        })
      }
      seen++
      if (rows.length >= READINGS_PER_WRITE) await flush()
    }
    await flush()
    await previous
    r.complete = true
    save()
  } finally {
    await sink.close()
  }
}

/** The measured trace: a 24 h cold-chain delivery that ended an hour ago, a reading every 10 s. */
async function traceDelivery(
  api: Api,
  m: HistoryManifest,
  clock: ReturnType<typeof testClock>,
  sink: { write(rows: readonly ReadingRow[]): Promise<void> },
): Promise<NonNullable<HistoryManifest['trace']>> {
  const fromMs = m.nowMs - 25 * HOUR_MS
  clock.set(fromMs - 60_000)
  const post = async (path: string, body: unknown, headers?: Record<string, string>) => {
    const res = await api.post(path, await api.tokenFor(BENCH_ADMIN.id, BENCH_ADMIN.secret), body, headers)
    if (res.status >= 300) throw new Error(`trace delivery: POST ${path}: ${res.status} ${res.text}`)
    return res.body as { delivery_id: string }
  }
  const pharmacyId = m.pharmacies[1]!
  const fleet = m.fleets[0]!
  const toteId = m.totes[1]![0]!
  const { delivery_id: deliveryId } = await post(
    '/v1/prescriptions',
    { patient_id: 'pt_trace', pharmacy_id: pharmacyId, cold_chain: true, temperature_profile: 'refrigerated' },
    { 'idempotency-key': 'history-trace' },
  )
  clock.set(fromMs)
  await post(`/v1/deliveries/${deliveryId}/dispatch`, { fleet_id: fleet.id, driver_id: fleet.driverIds[0], tote_id: toteId })
  const rx = (await api.get(`/v1/deliveries/${deliveryId}`, await api.tokenFor(BENCH_ADMIN.id, BENCH_ADMIN.secret))).body as {
    rx_id: string
  }
  const toMs = fromMs + 24 * HOUR_MS
  const rows: ReadingRow[] = []
  for (let ts = fromMs; ts < toMs; ts += TRACE_STEP_MS) {
    rows.push({
      ...{ tote_id: toteId, delivery_id: deliveryId, rx_id: rx.rx_id, ts, temp_c: 5 + Math.sin(ts / HOUR_MS), battery: 0.9 },
      ...{ humidity: null, lat: null, lng: null, seq: null, received_at: ts + 100, late: false },
    })
  }
  for (let i = 0; i < rows.length; i += READINGS_PER_WRITE) await sink.write(rows.slice(i, i + READINGS_PER_WRITE))
  clock.set(toMs)
  await post(`/v1/deliveries/${deliveryId}/pickup`, { from: pharmacyId, to: fleet.driverIds[0], signature: 'signed by Dana' })
  await post(`/v1/deliveries/${deliveryId}/deliver`, { verification: { method: 'otp', evidence: '482913' } })
  clock.set(m.nowMs)
  return { deliveryId, fromMs, toMs, readings: rows.length }
}
