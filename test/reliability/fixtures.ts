import { connect } from 'node:net'
import { openReadingsReadOnly } from '../../src/timeseries/sqlite-readings-reader.js'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import mqtt, { type MqttClient } from 'mqtt'
// mqtt.js' and aedes' own packet codec (a dependency of both).
import * as mqttPacket from 'mqtt-packet'
import type { ChildService } from '../helpers/child-service.js'
import { mulberry32 } from '../helpers/prng.js'

/** What the reliability tests set up over HTTP, as an integrator would. */

export type Tote = { id: string; mqtt: { username: string; password: string } }

let counter = 0

/** A pharmacy, a fleet, a tote and a cold-chain prescription dispatched with that tote now. */
export async function dispatchedColdChain(svc: ChildService, token: string, temperatureProfile: string | Record<string, unknown>) {
  const created = <T>(what: string, res: { status: number; body: T; text: string }) => {
    if (res.status !== 201 && res.status !== 200) throw new Error(`${what}: ${res.status} ${res.text}`)
    return res.body
  }
  const pharmacy = created(
    'pharmacy',
    await svc.post<{ id: string }>('/v1/pharmacies', token, {
      name: 'Reliability Pharmacy',
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    }),
  )
  const fleet = created('fleet', await svc.post<{ id: string }>('/v1/fleets', token, { name: 'Crash Couriers' }))
  const tote = created(
    'tote',
    await svc.post<Tote>('/v1/totes', token, { serial: `REL-${process.pid}-${++counter}-${Date.now()}`, pharmacy_id: pharmacy.id }),
  )
  const rx = created(
    'prescription',
    await svc.post<{ rx_id: string; delivery_id: string }>(
      '/v1/prescriptions',
      token,
      {
        pharmacy_id: pharmacy.id,
        patient_id: 'pt_reliability',
        cold_chain: true,
        temperature_profile: temperatureProfile,
      },
      { 'idempotency-key': `rel-${process.pid}-${++counter}-${Date.now()}` },
    ),
  )
  // occurred_at may not precede the prescription's creation, so the binding starts now.
  const dispatchedAt = Date.now()
  created(
    'dispatch',
    await svc.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, token, {
      fleet_id: fleet.id,
      tote_id: tote.id,
      occurred_at: new Date(dispatchedAt).toISOString(),
    }),
  )
  return { pharmacyId: pharmacy.id, fleetId: fleet.id, tote, rxId: rx.rx_id, deliveryId: rx.delivery_id, dispatchedAt }
}

/** A tote's own MQTT connection (client id = tote id, no automatic reconnect: tests decide). */
export function connectTote(svc: ChildService | { mqttUrl: string }, tote: Tote): Promise<MqttClient> {
  return mqtt.connectAsync(svc.mqttUrl, {
    username: tote.mqtt.username,
    password: tote.mqtt.password,
    clientId: tote.id,
    clean: true,
    reconnectPeriod: 0,
    connectTimeout: 5_000,
  })
}

export const readingsTopicOf = (toteId: string) => `rxtrace/v1/totes/${toteId}/readings`
export const errorsTopicOf = (toteId: string) => `rxtrace/v1/totes/${toteId}/errors`

/** Consecutive readings sent in one PUBLISH: a single reading object, or a gateway batch (an array). */
export type Unit = { first: number; count: number; payload: string }

/** Splits readings into publishes: about half single readings, the rest batches of 2..maxBatch. */
export function toUnits(readings: readonly { ts: number; temp_c: number }[], seed: number, maxBatch = 100): Unit[] {
  const random = mulberry32(seed)
  const units: Unit[] = []
  for (let i = 0; i < readings.length;) {
    const count = random() < 0.5 ? 1 : Math.min(readings.length - i, 2 + Math.floor(random() * (maxBatch - 1)))
    const slice = readings.slice(i, i + count).map((r, k) => ({ ...r, seq: i + k }))
    units.push({ first: i, count, payload: JSON.stringify(count === 1 ? slice[0] : slice) })
    i += count
  }
  return units
}

/** The unit that carries reading `index`. */
export const unitOf = (units: readonly Unit[], index: number) => units.findIndex((u) => index >= u.first && index < u.first + u.count)

/**
 * Publishes units at QoS 1 with at most `window` unacknowledged, recording each PUBACK.
 * Resolves when every unit is acknowledged, or when the connection closes.
 * `onSend` and `onAck` may return 'stop' to publish nothing more (a test about to kill the service).
 */
export async function publishUnits(
  client: MqttClient,
  topic: string,
  units: readonly Unit[],
  opts: {
    from: number
    window: number
    acked: boolean[]
    /** Wait for every PUBACK before sending this unit, so it reaches an idle service alone. */
    alone?: number
    /** After a publish was handed to the socket (before its PUBACK). */
    onSend?: (unit: number) => 'stop' | void
    onAck?: (unit: number) => 'stop' | void
  },
): Promise<{ stoppedAt: number | null }> {
  const { window, acked } = opts
  let next = opts.from
  let outstanding = 0
  let stoppedAt: number | null = null
  return new Promise((resolve) => {
    let settled = false
    const finish = () => {
      if (!settled) {
        settled = true
        resolve({ stoppedAt })
      }
    }
    client.once('close', finish) // the service went away (killed, stopping): what was acked is recorded
    const pump = () => {
      while (stoppedAt === null && outstanding < window && next < units.length) {
        if (next === opts.alone && outstanding > 0) return
        const u = next++
        outstanding++
        client.publish(topic, units[u]!.payload, { qos: 1 }, (err) => {
          outstanding--
          if (err) return // never acknowledged: the connection is gone
          acked[u] = true // a PUBACK that arrives after a kill was still sent by the service
          if (stoppedAt === null && opts.onAck?.(u) === 'stop') stoppedAt = u
          if (stoppedAt === null) {
            if (next >= units.length && outstanding === 0) finish()
            else pump()
          }
        })
        if (opts.onSend?.(u) === 'stop') stoppedAt = u
      }
    }
    pump()
  })
}

/** First unit not acknowledged (a reconnecting tote re-sends from there). */
export const firstUnacked = (acked: readonly boolean[], total: number) => {
  for (let u = 0; u < total; u++) if (!acked[u]) return u
  return total
}

/** Timestamps of a tote's stored readings, read straight from DATA_DIR/readings.db (service stopped or not). */
export function storedTimestamps(dataDir: string, toteId: string): Set<number> {
  const readings = openReadingsReadOnly(join(dataDir, 'readings.db'))
  try {
    return new Set(readings.timestampsOf(toteId))
  } finally {
    readings.close()
  }
}

/** A delivery's events as the outbox holds them in DATA_DIR/rxtrace.db. */
export function storedEvents(dataDir: string, deliveryId: string): { type: string; dedupe_key: string | null }[] {
  const db = new Database(join(dataDir, 'rxtrace.db'), { readonly: true, fileMustExist: true })
  try {
    return db.prepare('SELECT type, dedupe_key FROM events WHERE delivery_id = ? ORDER BY pos').all(deliveryId) as {
      type: string
      dedupe_key: string | null
    }[]
  } finally {
    db.close()
  }
}

/** Resolves on the client's 'close' (all bytes the dead peer sent, PUBACKs included, are processed by then). */
export function closed(client: MqttClient): Promise<void> {
  return new Promise((resolve) => {
    if (!client.connected) return resolve()
    client.once('close', () => resolve())
  })
}

/**
 * A tote speaking MQTT 3.1.1 over a bare socket with pre-encoded packets: a flood costs the test
 * process a socket write per message instead of mqtt.js' bookkeeping, so measurements of the
 * service are not measurements of the client sharing its event loop. QoS 1 deliveries to it (its
 * errors topic) are acknowledged and handed to `onMessage`.
 */
export async function rawTote(port: number, tote: Tote, onMessage: (topic: string, payload: Buffer) => void) {
  const socket = connect({ port, host: '127.0.0.1', noDelay: true })
  const parser = mqttPacket.parser({ protocolVersion: 4 })
  const waiting = new Map<string, (packet: mqttPacket.Packet) => void>()
  const pubacks = new Map<number, () => void>()
  let open = true
  socket.on('close', () => void (open = false))
  socket.on('error', () => void (open = false))
  socket.on('data', (chunk) => parser.parse(chunk))
  parser.on('packet', (packet) => {
    if (packet.cmd === 'puback') {
      const done = pubacks.get(packet.messageId!)
      pubacks.delete(packet.messageId!)
      done?.()
    } else if (packet.cmd === 'publish') {
      if (packet.qos === 1) socket.write(mqttPacket.generate({ cmd: 'puback', messageId: packet.messageId! }))
      onMessage(packet.topic, packet.payload as Buffer)
    } else {
      waiting.get(packet.cmd)?.(packet)
    }
  })
  const next = (cmd: string) => new Promise<mqttPacket.Packet>((resolve) => waiting.set(cmd, resolve))
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
  const connack = next('connack')
  socket.write(
    mqttPacket.generate({
      cmd: 'connect',
      protocolId: 'MQTT',
      protocolVersion: 4,
      clean: true,
      keepalive: 120,
      clientId: tote.id,
      username: tote.mqtt.username,
      password: Buffer.from(tote.mqtt.password),
    }),
  )
  const ack = (await connack) as mqttPacket.IConnackPacket
  if (ack.returnCode !== 0) throw new Error(`CONNACK ${ack.returnCode}`)

  let messageId = 0
  // Packet ids 1..65535 [MQTT-2.3.1-1]; never more than that many in flight here.
  const nextId = () => (messageId = (messageId % 65_535) + 1)
  return {
    get open() {
      return open && !socket.destroyed
    },
    async subscribe(topic: string): Promise<void> {
      const suback = next('suback')
      socket.write(mqttPacket.generate({ cmd: 'subscribe', messageId: nextId(), subscriptions: [{ topic, qos: 1 }] }))
      await suback
    },
    /** A QoS 1 PUBLISH; resolves on its PUBACK. */
    publish(topic: string, payload: Buffer): Promise<void> {
      const id = nextId()
      const acked = new Promise<void>((resolve) => pubacks.set(id, resolve))
      socket.write(mqttPacket.generate({ cmd: 'publish', topic, payload, qos: 1, messageId: id, retain: false, dup: false }))
      return acked
    },
    close: () => new Promise<void>((resolve) => socket.end(mqttPacket.generate({ cmd: 'disconnect' }), resolve)),
  }
}
