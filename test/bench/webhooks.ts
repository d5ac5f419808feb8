/**
 * `npm run bench:webhooks` — webhook fan-out: commit→receipt latency and deliveries per second.
 *
 * The service is built in this process (`buildService`, SQLite in a fresh temporary DATA_DIR,
 * exactly the store `npm start` uses) and started, so its dispatcher runs. The receivers
 * (10 keep-alive HTTP servers answering 204) run in a child process, so their CPU is not
 * the service's; they measure each event's lag from its envelope `created_at` (stamped inside
 * the committing transaction) to its receipt.
 *
 *   1. Under load: 10,000 events are committed through the outbox at `--rate` events/s, in
 *      transactions of up to `--batch` events, while the dispatcher delivers each to the 10
 *      endpoints: 100,000 deliveries. `seconds` runs from the first commit to the last receipt.
 *      A warm-up (`--warmup-events` at the same rate, delivered and then forgotten) comes
 *      first, so JIT compilation, lazily loaded modules and cold caches are not measured.
 *   2. Backlog drain, reported apart: on a fresh service, the same events are committed with
 *      the dispatcher stopped, then it starts; `seconds` runs from start to the last receipt.
 *
 * Prints one JSON object on stdout; progress goes to stderr.
 * Options: --events N (10000)  --endpoints N (10)  --rate events/s (250)  --batch N (5)  --warmup-events N (1000)
 *          --drain-events N (10000; 0 skips the drain)  --timeline (per-second deliveries and worst lag, to stderr)
 */
import { fork, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { allScopes, type Principal } from '../../src/auth/scopes.js'
import { loadConfig } from '../../src/config.js'
import { buildService, type Service } from '../../src/service.js'
import type { NewEvent } from '../../src/events/outbox.js'
import type { ReceiverMessage, ReceiverReport, ReceiverRequest } from './lib/webhooks-receivers.js'
import { parseBenchArgs } from './lib/args.js'

const opts = parseBenchArgs(
  'bench:webhooks',
  'Webhook fan-out: commit-to-receipt latency and deliveries per second. Prints one JSON object on stdout, progress on stderr.',
  {
    events: { type: 'string', default: '10000' },
    endpoints: { type: 'string', default: '10' },
    rate: { type: 'string', default: '250' },
    batch: { type: 'string', default: '5' },
    'warmup-events': { type: 'string', default: '1000' },
    'drain-events': { type: 'string', default: '10000' },
    timeline: { type: 'boolean', default: false },
  },
)
const EVENTS = Number(opts.events)
const ENDPOINTS = Number(opts.endpoints)
const RATE = Number(opts.rate)
const BATCH = Number(opts.batch)
const DRAIN_EVENTS = Number(opts['drain-events'])
const WARMUP_EVENTS = Number(opts['warmup-events'])
// Events are spread over this many deliveries, so each commit also bumps a delivery's `seq`.
const DELIVERIES = 100
// Production is paced in ticks this long; each tick commits what the rate says is due.
const TICK_MS = 10
// Deliveries still missing this long after the last commit count as errors.
const SETTLE_TIMEOUT_MS = 120_000

const log = (line: string): void => void process.stderr.write(`bench:webhooks ${line}\n`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const round = (n: number, digits = 1) => Math.round(n * 10 ** digits) / 10 ** digits
const admin: Principal = {
  clientId: 'cl_bench',
  sub: 'cl_bench',
  scopes: new Set(allScopes),
  pharmacyId: null,
  fleetId: null,
  jti: 'bench',
  exp: Number.MAX_SAFE_INTEGER,
}

/** The receivers' process, and a request/answer helper over its IPC channel. */
async function startReceivers(count: number) {
  const child: ChildProcess = fork(fileURLToPath(new URL('./lib/webhooks-receivers.ts', import.meta.url)), [String(count)], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  const next = <T extends ReceiverMessage['type']>(type: T) =>
    new Promise<Extract<ReceiverMessage, { type: T }>>((resolve) => {
      const onMessage = (message: ReceiverMessage) => {
        if (message.type !== type) return
        child.off('message', onMessage)
        resolve(message as Extract<ReceiverMessage, { type: T }>)
      }
      child.on('message', onMessage)
    })
  const { urls } = await next('ready')
  const ask = <T extends ReceiverMessage['type']>(request: ReceiverRequest, type: T) => {
    const answer = next(type)
    child.send(request)
    return answer
  }
  return {
    urls,
    setSecrets: (secrets: string[]) => void child.send({ type: 'secrets', secrets } satisfies ReceiverRequest),
    count: async () => (await ask({ type: 'count' }, 'count')).distinct,
    report: async (reset: boolean) => (await ask({ type: 'report', reset }, 'report')).report,
    stop: () => child.disconnect(),
  }
}
type Receivers = Awaited<ReturnType<typeof startReceivers>>

/** A service on a fresh SQLite store, a pharmacy with `DELIVERIES` deliveries, and one endpoint per receiver. */
async function prepareService(receivers: Receivers) {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-webhooks-'))
  const config = loadConfig({
    DATA_DIR: dataDir,
    PORT: '0',
    HOST: '127.0.0.1',
    MQTT_PORT: '0',
    MQTT_WS_PORT: 'off',
    LOG_LEVEL: 'warn',
    WEBHOOK_ALLOW_PRIVATE: 'true',
    ADMIN_CLIENT_ID: 'cl_bench_admin',
    ADMIN_CLIENT_SECRET: 'bench-admin-secret-not-for-production',
  })
  const service = await buildService(config)
  const { services } = service
  const pharmacy = await services.pharmacies.create(admin, {
    name: 'Bench Pharmacy',
    timezone: 'America/Chicago',
    address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
  })
  // Before any endpoint exists, so their delivery.created events go nowhere.
  const deliveryIds: string[] = []
  for (let i = 0; i < DELIVERIES; i++)
    deliveryIds.push(
      (await services.prescriptions.create(admin, { pharmacy_id: pharmacy.id, patient_id: `pt_${i}`, cold_chain: false })).delivery_id,
    )
  const secrets: string[] = []
  for (const url of receivers.urls)
    secrets.push((await services.webhooks.create(admin, { url: `${url}/hooks`, events: ['*'], pharmacy_id: pharmacy.id })).secret)
  receivers.setSecrets(secrets)
  return {
    service,
    pharmacyId: pharmacy.id,
    deliveryIds,
    async close() {
      await service.stop()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}

/** A dispatch-sized event (≈ 560-byte envelope) on one of the deliveries. */
function dispatchEvent(pharmacyId: string, deliveryId: string, n: number): NewEvent {
  return {
    type: 'delivery.dispatched',
    pharmacy_id: pharmacyId,
    fleet_id: 'fl_01jbenchfleet000000000000',
    delivery_id: deliveryId,
    rx_id: `rx_bench_${n}`,
    data: {
      status: 'DISPATCHED',
      previous_status: 'QUEUED',
      action: 'dispatch',
      occurred_at: new Date().toISOString(),
      from: pharmacyId,
      to: 'dr_01jbenchdriver00000000000',
      custody_seq: 2,
      custody_hash: `sha256:${'ab'.repeat(32)}`,
      fleet_id: 'fl_01jbenchfleet000000000000',
      driver_id: 'dr_01jbenchdriver00000000000',
      tote_id: null,
    },
  }
}

/** Commits `count` events through the outbox, `batch` per transaction, each commit waking the dispatcher. */
async function commitEvents(service: Service, pharmacyId: string, deliveryIds: string[], from: number, count: number) {
  const events = Array.from({ length: count }, (_, i) => dispatchEvent(pharmacyId, deliveryIds[(from + i) % deliveryIds.length]!, from + i))
  const { messages } = await service.db.transaction().execute((trx) => service.outbox.append(trx, events))
  service.outbox.committed(messages)
}

async function waitForDeliveries(receivers: Receivers, expected: number, deadline: number): Promise<void> {
  while ((await receivers.count()) < expected && Date.now() < deadline) await sleep(100)
}

const percentile = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : null

/** Failed attempts by cause (status code or transport error), e.g. `{ "ECONNRESET": 3 }`. */
async function failedAttempts(service: Service): Promise<{ total: number; by_cause: Record<string, number> }> {
  const rows = await service.db.selectFrom('webhook_attempts').select(['status_code', 'error']).where('success', '=', 0).execute()
  const byCause: Record<string, number> = {}
  for (const { status_code, error } of rows) {
    const cause = status_code === null ? (error ?? 'unknown').split(':')[0]! : String(status_code)
    byCause[cause] = (byCause[cause] ?? 0) + 1
  }
  return { total: rows.length, by_cause: byCause }
}

/** Commits events `from`‥`from + count` at `RATE` per second, in transactions of up to `BATCH`. */
async function produceAtRate(service: Service, pharmacyId: string, deliveryIds: string[], from: number, count: number): Promise<void> {
  const started = Date.now()
  let committed = 0
  while (committed < count) {
    const due = Math.min(count, Math.floor(((Date.now() - started) / 1_000) * RATE))
    while (committed < due) {
      const batch = Math.min(BATCH, due - committed)
      await commitEvents(service, pharmacyId, deliveryIds, from + committed, batch)
      committed += batch
    }
    await sleep(TICK_MS)
  }
}

/** Phase 1: events committed at a steady rate while the dispatcher delivers them. */
async function underLoad(receivers: Receivers) {
  const prepared = await prepareService(receivers)
  const { service, pharmacyId, deliveryIds } = prepared
  await service.start()
  if (WARMUP_EVENTS > 0) {
    log(`warm-up: ${WARMUP_EVENTS} events at ${RATE}/s`)
    await produceAtRate(service, pharmacyId, deliveryIds, 0, WARMUP_EVENTS)
    await waitForDeliveries(receivers, WARMUP_EVENTS * ENDPOINTS, Date.now() + SETTLE_TIMEOUT_MS)
    await sleep(500) // the last attempts are recorded
  }
  const failedBefore = await failedAttempts(service)
  await receivers.report(true)
  log(`under load: ${EVENTS} events at ${RATE}/s to ${ENDPOINTS} endpoints`)
  const cpuBefore = process.cpuUsage()
  const loopDelay = monitorEventLoopDelay({ resolution: 5 })
  loopDelay.enable()
  const started = Date.now()
  await produceAtRate(service, pharmacyId, deliveryIds, WARMUP_EVENTS, EVENTS)
  const producedSeconds = (Date.now() - started) / 1_000
  await waitForDeliveries(receivers, EVENTS * ENDPOINTS, Date.now() + SETTLE_TIMEOUT_MS)
  const cpu = process.cpuUsage(cpuBefore)
  loopDelay.disable()
  const report = await receivers.report(true)
  if (opts.timeline) for (const slot of report.timeline) log(`t=${slot.second}s received ${slot.received} worst lag ${slot.max_lag_ms} ms`)
  const failedAfter = await failedAttempts(service)
  await prepared.close()
  const failed = {
    total: failedAfter.total - failedBefore.total,
    by_cause: Object.fromEntries(
      Object.entries(failedAfter.by_cause)
        .map(([cause, n]) => [cause, n - (failedBefore.by_cause[cause] ?? 0)])
        .filter(([, n]) => Number(n) > 0),
    ),
  }
  const eventLoopDelayMs = { p99: round(loopDelay.percentile(99) / 1e6), max: round(loopDelay.max / 1e6) }
  return { started, producedSeconds, report, failed, cpuMs: (cpu.user + cpu.system) / 1_000, eventLoopDelayMs }
}

/** Phase 2: the same events committed with the dispatcher stopped, then drained. */
async function backlogDrain(receivers: Receivers) {
  const prepared = await prepareService(receivers)
  const { service } = prepared
  log(`backlog: committing ${DRAIN_EVENTS} events with the dispatcher stopped`)
  for (let committed = 0; committed < DRAIN_EVENTS; committed += 100) {
    await commitEvents(service, prepared.pharmacyId, prepared.deliveryIds, committed, Math.min(100, DRAIN_EVENTS - committed))
  }
  await receivers.report(true)
  log(`backlog: draining ${DRAIN_EVENTS * ENDPOINTS} deliveries`)
  const cpuBefore = process.cpuUsage()
  const started = Date.now()
  await service.start()
  await waitForDeliveries(receivers, DRAIN_EVENTS * ENDPOINTS, Date.now() + SETTLE_TIMEOUT_MS)
  const cpu = process.cpuUsage(cpuBefore)
  const report = await receivers.report(true)
  const failed = await failedAttempts(service)
  await prepared.close()
  const seconds = ((report.last_at ?? Date.now()) - started) / 1_000
  return {
    deliveries: report.distinct,
    seconds: round(seconds, 2),
    deliveries_per_s: Math.round(report.distinct / seconds),
    errors: failed.total + report.signature_failures + (DRAIN_EVENTS * ENDPOINTS - report.distinct),
    failed_attempts_by_cause: failed.by_cause,
    service_cpu_us_per_delivery: Math.round(((cpu.user + cpu.system) / report.distinct) * 10) / 10,
  }
}

function figures(phase: {
  started: number
  report: ReceiverReport
  failed: { total: number; by_cause: Record<string, number> }
  cpuMs: number
  eventLoopDelayMs: { p99: number; max: number }
}) {
  const { report } = phase
  const seconds = ((report.last_at ?? Date.now()) - phase.started) / 1_000
  const expected = EVENTS * ENDPOINTS
  return {
    deliveries: report.distinct,
    seconds: round(seconds, 2),
    deliveries_per_s: Math.round(report.distinct / seconds),
    commit_to_receipt_ms: { p50: percentile(report.lags_ms, 50), p99: percentile(report.lags_ms, 99), max: report.lags_ms.at(-1) ?? null },
    // Failed attempts (any non-2xx or transport error), bad signatures, deliveries that never came.
    errors: phase.failed.total + report.signature_failures + (expected - report.distinct),
    failed_attempts_by_cause: phase.failed.by_cause,
    // At-least-once: a delivery the receiver got but the service did not see succeed is sent again.
    duplicates: report.duplicates,
    // Service CPU (this process: dispatcher, producer, SQLite) per delivery: what the machine's load cannot inflate.
    service_cpu_us_per_delivery: Math.round(((phase.cpuMs * 1_000) / Math.max(1, report.distinct)) * 10) / 10,
    // How late the service's event loop ran timers: long stalls here are the service's own (or CPU starvation).
    event_loop_delay_ms: phase.eventLoopDelayMs,
  }
}

async function main(): Promise<void> {
  const loadBefore = round(loadavg()[0]!, 2)
  const receivers = await startReceivers(ENDPOINTS)
  try {
    const loaded = await underLoad(receivers)
    const drain = DRAIN_EVENTS > 0 ? await backlogDrain(receivers) : null
    process.stdout.write(
      `${JSON.stringify({
        events: EVENTS,
        endpoints: ENDPOINTS,
        ...figures(loaded),
        offered_events_per_s: RATE,
        warmup_events: WARMUP_EVENTS,
        produced_seconds: round(loaded.producedSeconds, 2),
        backlog_drain: drain && { events: DRAIN_EVENTS, ...drain },
        machine: { cpus: cpus().length, load_1m_before: loadBefore, load_1m_after: round(loadavg()[0]!, 2), receivers: 'separate process' },
      })}\n`,
    )
  } finally {
    receivers.stop()
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`bench:webhooks failed: ${(error as Error).stack ?? String(error)}\n`)
  process.exit(1)
})
