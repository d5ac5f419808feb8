/**
 * `npm run bench:epcis` — EPCIS 2.0 answers (docs/interop.md, EPCIS).
 *
 * The whole service runs in this process on SQLite files in a fresh temporary DATA_DIR.
 *
 * 1. A 24 h cold-chain delivery: dispatched 24 h ago, 17,280 readings (one per 5 s, one
 *    excursion) through the ingest pipeline and the rule engine, five handoffs (pickup, three
 *    driver handoffs, delivery). `GET /v1/deliveries/{id}/epcis` is then asked --repeat times
 *    through the app (service time: no socket); p50, p95 and max.
 * 2. --events EPCIS events (four per delivery: pickup, two handoffs, delivery) written straight
 *    into the store, then `GET /v1/epcis/events` read in full, page by page (--limit per page),
 *    for windows holding 10 % and 100 % of them. Memory is measured from a collected heap before
 *    each read (run with --expose-gc, as the npm script does): the heap peak over the read, and
 *    the heap retained (collected every 16 chunks). Streamed, both stay the same at 10 % and 100 %.
 * Prints one JSON object on stdout; progress goes to stderr.
 *
 * Options: --repeat N (20)  --events N (100000)  --limit N (10000)
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { cpus, loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseBenchArgs } from './lib/args.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { testClock } from '../helpers/clock.js'
import { startTestService } from '../helpers/service.js'

const opts = parseBenchArgs('bench:epcis', 'EPCIS document service time and event-query memory. Prints one JSON object on stdout.', {
  repeat: { type: 'string', default: '20' },
  events: { type: 'string', default: '100000' },
  limit: { type: 'string', default: '10000' },
})
const REPEAT = Number(opts.repeat)
const EVENTS = Number(opts.events)
const LIMIT = Number(opts.limit)
const gc = (globalThis as { gc?: () => void }).gc
const log = (line: string) => process.stderr.write(`${line}\n`)
const mib = (bytes: number) => Number((bytes / 2 ** 20).toFixed(1))
const HOUR = 3_600_000

const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-epcis-'))
const clock = testClock()
const api = await startTestService(
  { DATA_DIR: dataDir },
  { clock, store: { kind: 'sqlite', file: join(dataDir, 'rxtrace.db') }, sink: createSqliteSink({ path: join(dataDir, 'readings.db') }) },
)
try {
  const document = await deliveryDocument()
  const events = await eventPages()
  const result = {
    bench: 'epcis',
    document,
    events,
    host: { cpus: cpus().length, model: cpus()[0]?.model ?? null, loadavg: loadavg().map((l) => Number(l.toFixed(2))) },
    at: new Date().toISOString(),
  }
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
} finally {
  await api.stop()
  rmSync(dataDir, { recursive: true, force: true })
}

async function deliveryDocument() {
  const now = Date.now()
  const t0 = now - 24 * HOUR - 60_000
  clock.set(t0 - 60_000)
  let admin = await api.adminToken()
  const pharmacy = await api.pharmacy(admin, { gln: '0614141000012' })
  const { fleetId, driverId, driver2Id } = await api.fleetWithDriver(admin)
  const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
  const profile = { name: 'bench', min_c: 2, max_c: 8, grace_s: 0, max_excursion_s: 3_600, max_cumulative_s: 7_200 }
  const rx = await api.prescription(admin, {
    pharmacy_id: pharmacy.id,
    cold_chain: true,
    temperature_profile: { ...profile, hard_min_c: null, hard_max_c: null, mkt_max_c: null, max_gap_s: null },
    items: [{ description: 'Insulin', ndc: '0002-8215-01', quantity: 3 }],
  })
  const id = rx.delivery_id
  clock.set(t0 + 1_000)
  const act = async (action: string, body: Record<string, unknown>) => {
    const res = await api.post(`/v1/deliveries/${id}/${action}`, admin, body)
    if (res.status !== 200) throw new Error(`${action}: ${res.status} ${res.text}`)
  }
  await act('dispatch', { fleet_id: fleetId, tote_id: tote.id, occurred_at: new Date(t0).toISOString() })
  clock.set(now)
  admin = await api.adminToken()
  log('feeding 17,280 readings …')
  const readings = Array.from({ length: 17_280 }, (_, i) => {
    const ts = t0 + i * 5_000
    // One 20-minute excursion at 9.5 °C in the afternoon; otherwise a gentle 4–6 °C wave.
    const excursion = ts >= t0 + 14 * HOUR && ts < t0 + 14 * HOUR + 20 * 60_000
    return { ts, temp_c: excursion ? 9.5 : Number((5 + Math.sin(i / 500)).toFixed(2)) }
  })
  for (let i = 0; i < readings.length; i += 500) {
    await api.service.pipeline.handle(tote.id, Buffer.from(JSON.stringify(readings.slice(i, i + 500))))
  }
  await api.service.monitor.flush()
  const at = (hours: number) => new Date(t0 + hours * HOUR).toISOString()
  const signature = 'data:image/png;base64,iVBORw0KGgo='
  await act('pickup', { from: pharmacy.id, to: driverId, signature, occurred_at: at(1) })
  await act('handoff', { from: driverId, to: driver2Id, signature, occurred_at: at(6) })
  await act('handoff', { from: driver2Id, to: driverId, signature, occurred_at: at(12) })
  await act('handoff', { from: driverId, to: driver2Id, signature, occurred_at: at(18) })
  await act('deliver', { verification: { method: 'otp', evidence: '1' }, occurred_at: new Date(t0 + 24 * HOUR).toISOString() })

  const times: number[] = []
  let bytes = 0
  let events = 0
  for (let i = 0; i < REPEAT + 2; i++) {
    const started = performance.now()
    const res = await api.get(`/v1/deliveries/${id}/epcis`, admin)
    const ms = performance.now() - started
    if (res.status !== 200) throw new Error(`epcis: ${res.status} ${res.text}`)
    if (i >= 2) times.push(ms) // two warm-up reads: the first compiles the statements
    bytes = res.text.length
    events = res.body.epcisBody.eventList.length
  }
  times.sort((a, b) => a - b)
  const pick = (q: number) => Number(times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(1))
  log(`document: p50 ${pick(0.5)} ms`)
  return { readings: readings.length, handoffs: 5, events, bytes, requests: REPEAT, p50_ms: pick(0.5), p95_ms: pick(0.95), max_ms: pick(1) }
}

async function eventPages() {
  const db = api.service.db
  const admin = await api.adminToken()
  const pharmacyId = (await api.pharmacy(admin)).id
  const deliveries = Math.ceil(EVENTS / 4)
  const startMs = Date.parse('2026-01-01T00:00:00Z')
  log(`writing ${deliveries} deliveries with ${deliveries * 4} EPCIS events …`)
  const CHUNK = 200 // rows per statement, under SQLite's bound-parameter limit
  for (let start = 0; start < deliveries; start += CHUNK) {
    const ids = Array.from({ length: Math.min(CHUNK, deliveries - start) }, (_, k) => start + k)
    const iso = (i: number, step: number) => new Date(startMs + i * 60_000 + step * 1_000).toISOString()
    const name = (prefix: string, i: number) => `${prefix}_seed${String(i).padStart(10, '0')}`
    await db
      .insertInto('prescriptions')
      .values(
        ids.map((i) => ({
          id: name('rx', i),
          pharmacy_id: pharmacyId,
          patient_id: 'pt_seed',
          cold_chain: 0,
          temperature_profile: null,
          deliver_by: null,
          delivery_address: null,
          items: JSON.stringify([{ description: 'Insulin', ndc: '0002-8215-01', quantity: 1 + (i % 3) }]),
          external_ref: null,
          metadata: '{}',
          eta: iso(i, 5),
          audit_hash: `sha256:${'0'.repeat(64)}`,
          delivery_id: name('dl', i),
          client_id: 'cl_seed',
          created_at: iso(i, 0),
        })),
      )
      .execute()
    await db
      .insertInto('deliveries')
      .values(
        ids.map((i) => ({
          id: name('dl', i),
          rx_id: name('rx', i),
          pharmacy_id: pharmacyId,
          status: 'DELIVERED',
          eta: iso(i, 5),
          fleet_id: null,
          driver_id: null,
          tote_id: null,
          cold_chain_required: 0,
          profile: null,
          cold_chain: null,
          disposition: null,
          bound_from: null,
          bound_to: null,
          version: 6,
          event_seq: 0,
          created_at: iso(i, 0),
          updated_at: iso(i, 5),
          rate_card_version: null,
          ended_at: iso(i, 5),
          distance_m: null,
          after_hours: null,
          on_time: null,
          release: null,
          leg: 1,
        })),
      )
      .execute()
    const steps = ['picked_up', 'handoff', 'handoff', 'delivered'] as const
    const custody = ids.flatMap((i) =>
      steps.map((type, s) => ({
        delivery_id: name('dl', i),
        seq: s + 3,
        type,
        actor: '{"client_id":"cl_seed","sub":"cl_seed"}',
        from_party: 'dr_seed',
        to_party: 'dr_seed',
        location: null,
        evidence_hash: null,
        occurred_at: iso(i, s + 1),
        recorded_at: iso(i, s + 1),
        prev_hash: `sha256:${String(s).repeat(64)}`,
        hash: `sha256:${(s + 1).toString(16).repeat(64)}`,
      })),
    )
    await db.insertInto('custody_events').values(custody).execute()
    await db
      .insertInto('epcis_events')
      .values(
        custody.map((c) => ({
          delivery_id: c.delivery_id,
          seq: c.seq,
          pharmacy_id: pharmacyId,
          fleet_id: null,
          recorded_at: c.recorded_at,
        })),
      )
      .execute()
  }
  const total = deliveries * 4
  const endMs = startMs + deliveries * 60_000

  /** Reads every page of a window through the app's streamed body; memory against a collected heap before. */
  async function readAll(toMs: number, collectEvery: number | null) {
    gc?.()
    const base = process.memoryUsage().heapUsed
    let heapPeak = base
    let retainedPeak = 0
    let events = 0
    let chunks = 0
    let cursor: string | null = null
    const started = performance.now()
    do {
      const query = `to=${encodeURIComponent(new Date(toMs).toISOString())}&limit=${LIMIT}${cursor ? `&cursor=${cursor}` : ''}`
      const res = await api.service.app.request(`/v1/epcis/events?${query}`, { headers: { authorization: `Bearer ${admin}` } })
      if (res.status !== 200) throw new Error(`events: ${res.status} ${await res.text()}`)
      const reader = res.body!.getReader()
      const decoder = new TextDecoder()
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        const chunk = decoder.decode(value, { stream: true })
        // Counts events without keeping the page: each event opens with `{"type":"ObjectEvent"`.
        events += chunk.split('{"type":"ObjectEvent"').length - 1
        if (++chunks % 16 === 0 && collectEvery !== null) {
          gc?.()
          retainedPeak = Math.max(retainedPeak, process.memoryUsage().heapUsed - base)
        }
        heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed)
      }
      const link = res.headers.get('link')
      cursor = link ? new URL(`http://x${/^<([^>]+)>/.exec(link)![1]}`).searchParams.get('cursor') : null
    } while (cursor)
    return { events, ms: performance.now() - started, heapGrowthMiB: mib(heapPeak - base), retainedMiB: mib(retainedPeak) }
  }

  const windows = []
  for (const share of [0.1, 1]) {
    const toMs = startMs + Math.round((endMs - startMs) * share)
    const timed = await readAll(toMs, null)
    const kept = await readAll(toMs, 16)
    log(`events ${share * 100} %: ${timed.events} in ${Math.round(timed.ms)} ms, heap peak +${timed.heapGrowthMiB} MiB`)
    windows.push({
      share,
      events: timed.events,
      wall_ms: Math.round(timed.ms),
      us_per_event: Number(((timed.ms * 1_000) / timed.events).toFixed(1)),
      heap_peak_growth_mib: timed.heapGrowthMiB,
      heap_retained_peak_mib: kept.retainedMiB,
    })
  }
  return { total, page_limit: LIMIT, windows }
}
