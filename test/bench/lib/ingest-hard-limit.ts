/**
 * `npm run bench:ingest -- --mode hard-limit`: reading → `cold-chain.break` for a reading past a hard
 * limit, with the reorder window the service ships with (REORDER_WINDOW_S=30, not the 0 of the
 * throughput phases). Such a reading is judged on arrival (rules/hard-limit.ts), so its break must not
 * wait for the window: target p99 < 1 s.
 *
 * The service runs as its own process on SQLite; every tote of the fixture (dispatched cold-chain
 * deliveries, refrigerated profile) publishes 5 °C once a second over MQTT (QoS 1, its own
 * credentials), and at a moment of its own, spread over the run, one reading of −2 °C (below
 * hard_min_c 0 °C). Latency is the break's `created_at` in the outbox minus that publish's start.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import mqtt from 'mqtt'
import { createFixture, freePort, startService } from './ingest-service.js'
import { percentile, round } from './ingest-stats.js'
import { BENCH_ADMIN, benchServiceEnv } from './service-process.js'

const FREEZE_C = -2
const IN_RANGE_C = 5

export type HardLimitReport = {
  reorder_window_s: number
  totes: number
  seconds: number
  breaks_published: number
  breaks_raised: number
  /** Breaks whose latency reached the reorder window: they waited for it. */
  waited_for_window: number
  latency_ms: { p50: number; p99: number; max: number }
  target: { p99_ms: number; met: boolean }
}

export async function hardLimitLatency({
  totes,
  seconds,
  windowS,
  log,
}: {
  totes: number
  seconds: number
  windowS: number
  log: (line: string) => void
}): Promise<HardLimitReport> {
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-bench-hard-limit-'))
  const [httpPort, mqttPort] = [await freePort(), await freePort()]
  const env = benchServiceEnv(dataDir, httpPort, { MQTT_PORT: String(mqttPort), REORDER_WINDOW_S: String(windowS) })
  const service = await startService({ env, httpPort })
  const clients: mqtt.MqttClient[] = []
  try {
    const fixture = await createFixture(service.baseUrl, BENCH_ADMIN, { totes, bound: totes, onProgress: log })
    log(`hard-limit: ${totes} dispatched cold-chain deliveries, window ${windowS} s, ${seconds} s of readings`)
    for (const tote of fixture.totes)
      clients.push(
        await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
          username: tote.username,
          password: tote.password,
          clientId: tote.id,
          reconnectPeriod: 0,
        }),
      )
    const topic = (i: number) => `rxtrace/v1/totes/${fixture.totes[i]!.id}/readings`
    const publish = (i: number, temp_c: number) =>
      clients[i]!.publishAsync(topic(i), JSON.stringify({ ts: Date.now(), temp_c }), { qos: 1 })

    // Each tote's freeze at its own moment, after a few in-range seconds, spread over the run.
    const freezeAt = fixture.totes.map((_, i) => 3_000 + Math.floor(((seconds - 4) * 1_000 * i) / totes))
    const publishedAt = new Map<string, number>()
    const started = Date.now()
    const ticks: Promise<unknown>[] = []
    const timer = setInterval(() => {
      for (let i = 0; i < totes; i++) if (!publishedAt.has(fixture.totes[i]!.id)) ticks.push(publish(i, IN_RANGE_C))
    }, 1_000)
    await Promise.all(
      freezeAt.map(async (offset, i) => {
        await new Promise((resolve) => setTimeout(resolve, offset - (Date.now() - started)))
        publishedAt.set(fixture.totes[i]!.id, Date.now())
        await publish(i, FREEZE_C)
      }),
    )
    clearInterval(timer)
    await Promise.all(ticks)

    // Breaks raised at once are all in the outbox well before the window; wait no longer than a window would take.
    const deadline = Date.now() + windowS * 1_000 + 5_000
    let created = breaksByTote(dataDir)
    while (created.size < totes && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      created = breaksByTote(dataDir)
    }
    const latencies: number[] = []
    for (const [toteId, at] of publishedAt) {
      const c = created.get(toteId)
      if (c !== undefined) latencies.push(c - at)
    }
    latencies.sort((a, b) => a - b)
    const p99 = percentile(latencies, 99)
    return {
      reorder_window_s: windowS,
      totes,
      seconds,
      breaks_published: publishedAt.size,
      breaks_raised: latencies.length,
      waited_for_window: latencies.filter((l) => l >= windowS * 1_000).length,
      latency_ms: { p50: round(percentile(latencies, 50), 1), p99: round(p99, 1), max: round(latencies.at(-1) ?? NaN, 1) },
      target: { p99_ms: 1_000, met: latencies.length === publishedAt.size && p99 < 1_000 },
    }
  } finally {
    await Promise.all(clients.map((c) => c.endAsync().catch(() => undefined)))
    await service.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
}

/** tote id → epoch ms of its cold-chain.break in the outbox. */
function breaksByTote(dataDir: string): Map<string, number> {
  const db = new Database(join(dataDir, 'rxtrace.db'), { readonly: true, fileMustExist: true })
  try {
    const rows = db
      .prepare<[], { created_at: string; data: string }>("SELECT created_at, data FROM events WHERE type = 'cold-chain.break'")
      .all()
    return new Map(rows.map((r) => [(JSON.parse(r.data) as { tote_id: string }).tote_id, Date.parse(r.created_at)]))
  } finally {
    db.close()
  }
}
