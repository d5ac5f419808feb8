/**
 * The tote side of `npm run bench:ingest`, in its own process so it does not share an event loop
 * (or a core) with the broker under test. Driven by the parent over IPC (ingest-protocol.ts);
 * progress goes to stderr.
 *
 * Each tote is its own mqtt.js connection (MQTT 3.1.1, clean session, QoS 1) with its own
 * credentials. A reading's ts is the wall clock at publish time, kept strictly increasing per
 * tote, so (tote_id, ts) never collides and every acknowledged reading is a new stored row.
 *
 * Two ways to publish (`wire` of the connect message):
 * - `mqttjs`: mqtt.js connections, `client.publish(topic, payload, {qos: 1}, cb)`.
 * - `raw` (default): each tote is a plain TCP connection speaking MQTT 3.1.1 through
 *   ingest-raw-client.ts (CONNECT with its credentials, SUBSCRIBE to its errors topic); the QoS 1
 *   PUBLISH is encoded here and written to the tote's socket, one write per publish as a device
 *   sends it, and PUBACKs are read off the socket. mqtt.js's send and receive paths cost more
 *   CPU per message than the bare broker spends on it, so with them the publisher, not the
 *   broker, sets the limit on a 2-core machine (and its event-loop delay is measured as PUBACK
 *   latency).
 */
import { performance } from 'node:perf_hooks'
import type { Socket } from 'node:net'
import mqtt, { type MqttClient } from 'mqtt'
import { connectRaw, type RawConnection } from './ingest-raw-client.js'
import type { FromPublisher, Phase, PhaseResult, ToPublisher, ToteCredentials } from './ingest-protocol.js'
import { LatencySamples, round } from './ingest-stats.js'

type Tote = {
  id: string
  topic: string
  /** `--wire mqttjs`: the mqtt.js client; raw: null. */
  client: MqttClient | null
  /** `--wire raw`: the tote's own connection; mqttjs: null. */
  raw: RawConnection | null
  connected(): boolean
  /** Closes the connection (DISCONNECT first). */
  end(): Promise<void>
  /** Raw wire: the topic as it is encoded in a PUBLISH (2-byte length, then UTF-8). */
  topicField: Buffer
  /** Raw wire: PUBLISHes waiting for their PUBACK, by packet identifier. */
  awaiting: Map<number, (err: Error | null) => void>
  nextPacketId: number
  inFlight: number
  lastTs: number
  seq: number
  tempC: number
  /** Readings left in an out-of-range blip (shorter than the profile's grace, so no event). */
  blip: number
}

const totes: Tote[] = []
const totals = { acked: 0, ackedReadings: 0, errors: 0, rejected: 0 }
let rejected = 0
let errors = 0

const send = (message: FromPublisher) => process.send!(message)
const log = (line: string) => process.stderr.write(`[publisher] ${line}\n`)

// A refrigerated tote drifts around 5 °C; about 1 reading in 2,000 starts a 3-reading blip to
// ~9 °C (out of the 2–8 °C range, but far shorter than grace_s, so it is judged, not raised).
const BLIP_CHANCE = 0.0005
const BLIP_READINGS = 3

function nextTs(tote: Tote, count: number): number {
  const now = Date.now()
  const first = Math.max(tote.lastTs + 1, now - (count - 1))
  tote.lastTs = first + count - 1
  return first
}

function nextTemp(tote: Tote): number {
  if (tote.blip > 0) {
    tote.blip--
    return 9 + Math.random() * 0.5
  }
  if (Math.random() < BLIP_CHANCE) tote.blip = BLIP_READINGS
  tote.tempC += (5 - tote.tempC) * 0.05 + (Math.random() - 0.5) * 0.2
  return Math.round(tote.tempC * 100) / 100
}

function payloadOf(tote: Tote, batch: number, forcedTemp?: number): string {
  const first = nextTs(tote, batch)
  const reading = (ts: number) => `{"ts":${ts},"temp_c":${forcedTemp ?? nextTemp(tote)},"seq":${tote.seq++},"battery":0.87}`
  if (batch === 1) return reading(first)
  let out = '['
  for (let i = 0; i < batch; i++) out += (i ? ',' : '') + reading(first + i)
  return out + ']'
}

/** Raw wire: a QoS 1 PUBLISH (MQTT 3.1.1 §3.3) of `payload` on the tote's topic. */
function publishRaw(tote: Tote, payload: string, done: (err: Error | null) => void): void {
  if (!tote.connected()) return done(new Error('not connected'))
  tote.nextPacketId = (tote.nextPacketId % 65_535) + 1 // [MQTT-2.3.1-1] non-zero, 16 bits
  const payloadBytes = Buffer.byteLength(payload)
  const remaining = tote.topicField.length + 2 + payloadBytes
  let lengthBytes = 1
  for (let n = remaining; n > 127; n = Math.floor(n / 128)) lengthBytes++
  const packet = Buffer.allocUnsafe(1 + lengthBytes + remaining)
  packet[0] = 0x32 // PUBLISH, QoS 1, DUP 0, RETAIN 0
  let at = 1
  let n = remaining
  do {
    // §2.2.3 Remaining Length: 7 bits per byte, high bit set while more follow
    const digit = n % 128
    n = Math.floor(n / 128)
    packet[at++] = n > 0 ? digit | 0x80 : digit
  } while (n > 0)
  at += tote.topicField.copy(packet, at)
  packet.writeUInt16BE(tote.nextPacketId, at)
  packet.write(payload, at + 2)
  tote.awaiting.set(tote.nextPacketId, done)
  // One write per publish, as a device sends a reading when it has one.
  tote.raw!.socket.write(packet)
}

let wire: 'raw' | 'mqttjs' = 'raw'

async function connect(url: string, creds: ToteCredentials[], subscribeErrors: boolean, parallel: number): Promise<void> {
  const started = performance.now()
  let failed = 0
  let firstError: string | undefined
  let next = 0
  const worker = async () => {
    while (next < creds.length) {
      const c = creds[next++]!
      try {
        const topic = `rxtrace/v1/totes/${c.id}/readings`
        const topicField = Buffer.alloc(2 + Buffer.byteLength(topic))
        topicField.writeUInt16BE(topicField.length - 2, 0)
        topicField.write(topic, 2)
        const errorsTopic = `rxtrace/v1/totes/${c.id}/errors`
        const onMessage = (_topic: string, payload: Buffer) => {
          rejected++
          if (rejected <= 5) log(`rejected: ${payload.toString()}`)
        }
        const onClose = () => {
          if (!closing) {
            errors++
            if (errors <= 5) log(`connection of ${c.id} closed by the broker`)
          }
          const lost = [...tote.awaiting.values()]
          tote.awaiting.clear()
          for (const done of lost) done(new Error('connection closed'))
        }
        const tote: Tote = {
          id: c.id,
          topic,
          client: null,
          raw: null,
          connected: () => false,
          end: async () => {},
          topicField,
          awaiting: new Map(),
          nextPacketId: 0,
          inFlight: 0,
          lastTs: 0,
          seq: 0,
          tempC: 4 + Math.random() * 2,
          blip: 0,
        }
        if (wire === 'raw') {
          const raw = await connectRaw(
            url,
            {
              clientId: c.id,
              username: c.username,
              password: c.password,
              keepaliveS: 120,
              ...(subscribeErrors ? { subscribe: errorsTopic } : {}),
            },
            {
              onPuback: (id) => {
                const done = tote.awaiting.get(id)
                if (done === undefined) return
                tote.awaiting.delete(id)
                done(null)
              },
              onMessage,
              onClose,
            },
          )
          tote.raw = raw
          tote.connected = () => raw.connected
          tote.end = () => raw.end()
        } else {
          const client = await mqtt.connectAsync(url, {
            username: c.username,
            password: c.password,
            clientId: c.id,
            clean: true,
            protocolVersion: 4,
            reconnectPeriod: 0,
            connectTimeout: 30_000,
            keepalive: 120,
          })
          ;(client.stream as Socket).setNoDelay?.(true) // a QoS 1 publish is small and its sender waits for the PUBACK
          client.on('close', onClose)
          if (subscribeErrors) {
            client.on('message', onMessage)
            await client.subscribeAsync(errorsTopic, { qos: 1 })
          }
          tote.client = client
          tote.connected = () => client.connected
          tote.end = () => client.endAsync().then(() => undefined)
        }
        totes.push(tote)
      } catch (err) {
        failed++
        firstError ??= (err as Error).message
      }
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
  send({
    type: 'connected',
    connected: totes.length,
    failed,
    ms: Math.round(performance.now() - started),
    ...(firstError ? { firstError } : {}),
  })
}

let closing = false

async function run(phase: Phase): Promise<PhaseResult> {
  const active = totes.slice(0, phase.totes ?? totes.length)
  const latency = new LatencySamples()
  let second = new LatencySamples()
  const perSecond: number[] = []
  let secondReadings = 0
  let publishes = 0
  let acked = 0
  let ackedReadings = 0
  let behind = 0
  const errorsBefore = errors
  const rejectedBefore = rejected
  const breaks: PhaseResult['breaks'] = []
  const started = performance.now()
  const endsAt = started + phase.durationMs
  let running = true
  let outstanding = 0
  let drained: (() => void) | null = null

  const publish = (tote: Tote, forcedTemp?: number, onAck?: (at: number) => void) => {
    const body = payloadOf(tote, forcedTemp === undefined ? phase.batch : 1, forcedTemp)
    const readings = forcedTemp === undefined ? phase.batch : 1
    tote.inFlight++
    outstanding++
    publishes++
    const t0 = performance.now()
    const send =
      wire === 'raw'
        ? publishRaw
        : (t: Tote, payload: string, cb: (err: Error | null) => void) => {
            t.client!.publish(t.topic, payload, { qos: 1 }, (err) => cb(err ?? null))
          }
    send(tote, body, (err) => {
      const t1 = performance.now()
      tote.inFlight--
      outstanding--
      if (err) {
        errors++
      } else {
        acked++
        ackedReadings += readings
        totals.acked++
        totals.ackedReadings += readings
        if (t1 <= endsAt) {
          latency.add(t1 - t0)
          second.add(t1 - t0)
          secondReadings += readings
        }
        onAck?.(Date.now())
      }
      if (running && phase.rate === undefined && forcedTemp === undefined && tote.connected()) publish(tote)
      if (!running && outstanding === 0) drained?.()
    })
  }

  // Closed loop: fill every window; each PUBACK sends the next publish.
  if (phase.rate === undefined) for (const tote of active) for (let i = 0; i < phase.window; i++) publish(tote)

  // Open loop: a pacer sends rate/s, round-robin over totes whose window has room.
  let pacer: NodeJS.Timeout | null = null
  if (phase.rate !== undefined) {
    const rate = phase.rate
    let cursor = 0
    let issued = 0
    const tick = () => {
      if (!running) return
      const elapsed = (performance.now() - started) / 1_000
      let due = Math.floor(elapsed * rate) - issued
      // Never catch up more than 50 ms of backlog at once: a burst would measure the burst.
      if (due > rate * 0.05) {
        behind += due - Math.floor(rate * 0.05)
        issued += due - Math.floor(rate * 0.05)
        due = Math.floor(rate * 0.05)
      }
      let scanned = 0
      while (due > 0 && scanned < active.length) {
        const tote = active[cursor]!
        cursor = (cursor + 1) % active.length
        if (tote.inFlight < phase.window && tote.connected()) {
          publish(tote)
          due--
          issued++
          scanned = 0
        } else {
          scanned++
        }
      }
      pacer = setTimeout(tick, 1)
    }
    tick()
  }

  // Breaks: one tote at a time, spread over the phase.
  let breaker: NodeJS.Timeout | null = null
  if (phase.breaks && phase.breaks.toteIds.length) {
    const byId = new Map(active.map((t) => [t.id, t]))
    const queue = phase.breaks.toteIds.filter((id) => byId.has(id))
    const { everyMs, tempC } = phase.breaks
    // Due by elapsed time, so a busy event loop delays breaks but never drops them.
    breaker = setInterval(() => {
      const due = Math.floor((performance.now() - started) / everyMs)
      while (running && breaks.length < due && queue.length) {
        const id = queue.shift()!
        const record: PhaseResult['breaks'][number] = { toteId: id, publishedAtMs: Date.now(), ackedAtMs: null }
        breaks.push(record)
        publish(byId.get(id)!, tempC, (at) => (record.ackedAtMs = at))
      }
    }, everyMs)
  }

  const progress = setInterval(() => {
    const [p50, p99] = second.count ? second.percentiles([50, 99]) : [Number.NaN, Number.NaN]
    perSecond.push(secondReadings)
    log(
      `${phase.name} t=${perSecond.length}s ${secondReadings} readings/s in_flight=${outstanding} p50=${round(p50!, 2)}ms p99=${round(p99!, 2)}ms errors=${errors - errorsBefore}`,
    )
    secondReadings = 0
    second = new LatencySamples()
  }, 1_000)

  await new Promise((resolve) => setTimeout(resolve, phase.durationMs))
  running = false
  if (pacer) clearTimeout(pacer)
  if (breaker) clearInterval(breaker)
  clearInterval(progress)
  const measuredMs = performance.now() - started
  if (outstanding > 0) {
    await Promise.race([new Promise<void>((resolve) => (drained = resolve)), new Promise((resolve) => setTimeout(resolve, 30_000))])
  }
  if (outstanding > 0) log(`${phase.name}: ${outstanding} publishes still unacknowledged after 30 s`)
  const [p50, p90, p99, p999, max] = latency.percentiles([50, 90, 99, 99.9, 100])
  return {
    name: phase.name,
    elapsedMs: Math.round(measuredMs),
    publishes,
    acked,
    ackedReadings,
    errors: errors - errorsBefore + outstanding,
    rejected: rejected - rejectedBefore,
    behind,
    latency: { p50: p50!, p90: p90!, p99: p99!, p999: p999!, max: max!, n: latency.count },
    perSecond,
    breaks,
  }
}

async function disconnect(): Promise<void> {
  closing = true
  let next = 0
  const worker = async () => {
    while (next < totes.length) {
      const tote = totes[next++]!
      await tote.end().catch(() => undefined)
    }
  }
  await Promise.all(Array.from({ length: 100 }, worker))
  totes.length = 0
  totals.errors = errors
  totals.rejected = rejected
  send({ type: 'disconnected', totals: { ...totals } })
  closing = false
}

process.on('message', (message: ToPublisher) => {
  if (message.type === 'connect') wire = message.wire
  const task =
    message.type === 'connect'
      ? connect(message.url, message.totes, message.subscribeErrors, message.parallel)
      : message.type === 'run'
        ? run(message.phase).then((result) => send({ type: 'result', result }))
        : disconnect()
  task.catch((err: unknown) => send({ type: 'error', message: (err as Error).stack ?? String(err) }))
})
process.on('disconnect', () => process.exit(0)) // the parent went away
process.on('SIGTERM', () => process.exit(0)) // an orderly exit, so `node --cpu-prof` writes its profile
