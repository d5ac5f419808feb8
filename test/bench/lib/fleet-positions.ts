/**
 * Section `positions` of `npm run bench:fleet` (docs/fleet.md, Live location and ETA):
 * 1. The service as a child process (SQLite, fresh DATA_DIR), its webhooks allowed to 127.0.0.1.
 * 2. `--position-totes` totes (reading publisher child, raw MQTT, QoS 1) and `--drivers` drivers,
 *    each a driver user signed in through the sign-in page (its own access token) with a
 *    delivery PICKED_UP whose address has coordinates; a webhook for `delivery.eta-changed` to a
 *    receiver in this process.
 * 3. For `--position-seconds`, the totes publish `--tote-rate` readings/s while every driver
 *    publishes a position every `--position-every-s` on its own MQTT topic (mqtt.js, QoS 1, with
 *    its token), alternating 20 km and 10 km from the door: every position moves the ETA by
 *    24 minutes, so each delivery sends `delivery.eta-changed` as often as the rate limit lets it
 *    (once a minute), and each one is timed from the publish of the position that caused it
 *    (the driver's newest publish before the webhook arrived) to its receipt.
 * 4. Position PUBACK p50/p99, position → webhook p50/p99, reading PUBACK p99 alongside, and the
 *    service's CPU per message (positions + readings) over the phase.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import mqtt, { type MqttClient } from 'mqtt'
import { authorizationCode, REDIRECT } from '../../../simulators/pharmacist.js'
import type { Phase, PhaseResult } from './ingest-protocol.js'
import { apiClient, createFixture, type ServiceChild } from './ingest-service.js'
import { cpuSeconds, percentile, round } from './ingest-stats.js'
import { BENCH_ADMIN } from './service-process.js'

export type PositionsOptions = {
  drivers: number
  totes: number
  seconds: number
  everyS: number
  toteRate: number
  log: (line: string) => void
  startService: (env: Record<string, string>) => Promise<{ service: ServiceChild; mqttUrl: string; stop(): Promise<number | null> }>
  startPublisher: () => {
    connect(url: string, totes: { id: string; username: string; password: string }[]): Promise<{ failed: number; firstError?: string }>
    run(phase: Phase): Promise<PhaseResult>
    disconnect(): Promise<unknown>
    stop(): void
  }
}

const DOOR = { lat: 39.7817, lng: -89.6501 }
const METRES_PER_DEGREE = (Math.PI / 180) * 6_371_008.8
const TARGET = { pubackP99Ms: 50, etaChangedP99Ms: 1_000 }

const summary = (values: number[]) =>
  values.length
    ? {
        n: values.length,
        p50_ms: round(percentile(values, 50), 1),
        p99_ms: round(percentile(values, 99), 1),
        max_ms: round(Math.max(...values), 1),
      }
    : { n: 0 }

async function inParallel<T, R>(items: readonly T[], parallel: number, task: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(parallel, items.length) }, async () => {
      while (next < items.length) {
        const i = next++
        results[i] = await task(items[i]!, i)
      }
    }),
  )
  return results
}

export async function positionsSection(o: PositionsOptions) {
  const { log } = o
  const { service, mqttUrl, stop } = await o.startService({ WEBHOOK_ALLOW_PRIVATE: 'true', PASSWORD_SCRYPT_LOG2_N: '10' })
  const publisher = o.startPublisher()
  const clients: MqttClient[] = []
  // The webhook receiver: receipt time of each delivery.eta-changed, by delivery.
  const received: { deliveryId: string; at: number }[] = []
  const receiver = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const at = Date.now()
      try {
        const event = JSON.parse(Buffer.concat(chunks).toString()) as { type: string; delivery_id: string }
        if (event.type === 'delivery.eta-changed') received.push({ deliveryId: event.delivery_id, at })
      } catch {
        /* not an event */
      }
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  try {
    const fixture = await createFixture(service.baseUrl, BENCH_ADMIN, { totes: o.totes, bound: 0, onProgress: log })
    const api = apiClient(service.baseUrl)
    await api.login(BENCH_ADMIN.id, BENCH_ADMIN.secret)
    const app = await api.post<{ client_id: string }>('/v1/oauth/clients', {
      client_name: 'bench driver app',
      token_endpoint_auth_method: 'none',
      redirect_uris: [REDIRECT],
      first_party: true,
      scope: 'deliveries:read custody:write telemetry:read',
    })
    await api.post('/v1/webhooks', {
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      events: ['delivery.eta-changed'],
    })
    const started = Date.now()
    const drivers = await inParallel(
      Array.from({ length: o.drivers }, (_, i) => i),
      8,
      async (i) => {
        const driver = await api.post<{ id: string }>(`/v1/fleets/${fixture.fleetId}/drivers`, { name: `Driver ${i}` })
        const email = `driver-${i}@bench.example`
        const password = 'correct horse battery staple 42'
        await api.post('/v1/users', {
          email,
          name: `Driver ${i}`,
          role: 'driver',
          fleet_id: fixture.fleetId,
          driver_id: driver.id,
          password,
        })
        const { code, verifier } = await authorizationCode(service.baseUrl, app.client_id, email, password)
        const token = await fetch(`${service.baseUrl}/oauth/token`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({
            grant_type: 'authorization_code',
            code,
            redirect_uri: REDIRECT,
            code_verifier: verifier,
            client_id: app.client_id,
          }),
        }).then(async (r) => ((await r.json()) as { access_token: string }).access_token)
        const rx = await api.post<{ delivery_id: string }>(
          '/v1/prescriptions',
          {
            patient_id: `pt_pos_${i}`,
            pharmacy_id: fixture.pharmacyId,
            cold_chain: false,
            delivery_address: { line1: `${i} Elm St`, ...DOOR },
          },
          { 'idempotency-key': `bench-pos-${i}` },
        )
        await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, { fleet_id: fixture.fleetId, driver_id: driver.id })
        await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, { from: fixture.pharmacyId, to: driver.id, signature: 'bench' })
        if ((i + 1) % 100 === 0)
          log(`${i + 1} drivers signed in with a delivery picked up (${Math.round((Date.now() - started) / 1_000)} s)`)
        return { id: driver.id, token, deliveryId: rx.delivery_id, publishes: [] as number[], flip: i % 2 }
      },
    )
    const byDelivery = new Map(drivers.map((d) => [d.deliveryId, d]))

    const connected = await publisher.connect(mqttUrl, fixture.totes)
    if (connected.failed) throw new Error(`${connected.failed} totes could not connect: ${connected.firstError}`)
    // In the drivers' order: each driver publishes on its own connection (another's topic is refused and closes it).
    clients.push(
      ...(await inParallel(drivers, 50, (d) =>
        mqtt.connectAsync(mqttUrl, { username: d.id, password: d.token, clientId: d.id, reconnectPeriod: 0 }),
      )),
    )
    log(`${o.totes} totes and ${o.drivers} drivers connected`)

    const positionAcks: number[] = []
    let positionErrors = 0
    let sent = 0
    const send = (d: (typeof drivers)[number], client: MqttClient) => {
      d.flip ^= 1
      const metres = d.flip ? 20_000 : 10_000
      const payload = JSON.stringify({
        lat: DOOR.lat + metres / METRES_PER_DEGREE,
        lng: DOOR.lng,
        accuracy_m: 8,
        at: new Date().toISOString(),
      })
      const t0 = performance.now()
      d.publishes.push(Date.now())
      sent++
      client.publish(`rxtrace/v1/drivers/${d.id}/location`, payload, { qos: 1 }, (err) => {
        if (err) positionErrors++
        else positionAcks.push(performance.now() - t0)
      })
    }
    // Each driver on its own 5 s beat, spread evenly over the interval.
    const everyMs = o.everyS * 1_000
    const timers: NodeJS.Timeout[] = []
    const cpu0 = cpuSeconds(service.pid)
    const t0 = performance.now()
    drivers.forEach((d, i) => {
      const client = clients[i]!
      timers.push(
        setTimeout(
          () => {
            send(d, client)
            timers.push(setInterval(() => send(d, client), everyMs))
          },
          Math.floor((i * everyMs) / drivers.length),
        ),
      )
    })
    const readings = await publisher.run({
      name: 'readings-with-positions',
      durationMs: o.seconds * 1_000,
      batch: 1,
      window: 4,
      rate: o.toteRate,
    })
    for (const t of timers) clearTimeout(t)
    const seconds = (performance.now() - t0) / 1_000
    const cpu1 = cpuSeconds(service.pid)
    await new Promise((resolve) => setTimeout(resolve, 3_000)) // the last webhooks on their way
    const cpu = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0

    const lags: number[] = []
    for (const r of received) {
      const d = byDelivery.get(r.deliveryId)
      const cause = d?.publishes.filter((p) => p <= r.at).at(-1)
      if (cause !== undefined) lags.push(r.at - cause)
    }
    const pubacks = summary(positionAcks)
    const etaChanged = summary(lags)
    const messages = readings.ackedReadings + positionAcks.length
    const result = {
      settings: { drivers: o.drivers, totes: o.totes, seconds: o.seconds, position_every_s: o.everyS, readings_per_s: o.toteRate },
      positions: {
        sent,
        acked: positionAcks.length,
        errors: positionErrors,
        // Sent but neither acknowledged nor failed 3 s after the run: must be 0.
        unanswered: sent - positionAcks.length - positionErrors,
        per_s: round(positionAcks.length / seconds, 0),
        puback: pubacks,
      },
      eta_changed: { received: received.length, latency: etaChanged },
      readings: {
        per_s: round(readings.ackedReadings / (readings.elapsedMs / 1_000), 0),
        puback_p50_ms: round(readings.latency.p50, 2),
        puback_p99_ms: round(readings.latency.p99, 2),
        errors: readings.errors + readings.rejected,
        behind: readings.behind,
      },
      service: {
        cpu_pct: cpu === null ? null : round((cpu / seconds) * 100, 0),
        cpu_us_per_message: cpu === null || !messages ? null : round((cpu * 1e6) / messages, 1),
      },
      targets: {
        position_puback_p99_under_50ms:
          (pubacks.p99_ms ?? Infinity) < TARGET.pubackP99Ms && positionErrors === 0 && sent === positionAcks.length,
        eta_changed_p99_under_1s: (etaChanged.p99_ms ?? Infinity) < TARGET.etaChangedP99Ms,
      },
    }
    log(`positions: ${JSON.stringify(result)}`)
    return result
  } finally {
    await Promise.all(clients.map((c) => c.endAsync(true).catch(() => {})))
    receiver.close()
    await publisher.disconnect().catch(() => {})
    publisher.stop()
    const code = await stop()
    log(`service stopped with code ${code}`)
  }
}
