import { connectAsync, type MqttClient } from 'mqtt'
import type { SimulatedReading } from './scenarios.js'

/**
 * One simulated tote over MQTT (SPEC §4): it signs in with its own credentials (username and
 * client id = tote id), publishes readings at QoS 1 to its readings topic — one at a time live,
 * as a batch when a gateway uploads a backlog — and listens on its errors topic for the reasons
 * the service refused a payload.
 */

export type ToteCredentials = { toteId: string; password: string }
/** What the service publishes on a tote's errors topic. */
export type Rejection = { error: string; reason: string; at?: string }
export type ToteStats = { connected: boolean; sent: number; acked: number; rejected: number }

const topics = (toteId: string) => ({ readings: `rxtrace/v1/totes/${toteId}/readings`, errors: `rxtrace/v1/totes/${toteId}/errors` })
// The embedded broker speaks MQTT 3.1.1 (protocol level 4).
const MQTT_3_1_1 = 4
// A tote that lost its connection tries again this often; unacknowledged QoS 1 publishes are resent.
const RECONNECT_MS = 1_000
// SPEC §4: a batch holds at most 500 readings.
export const MAX_BATCH = 500

export class SimulatedTote {
  readonly stats: ToteStats = { connected: true, sent: 0, acked: 0, rejected: 0 }
  private seq = 0

  private constructor(
    readonly toteId: string,
    private readonly client: MqttClient,
    onRejected: (rejection: Rejection, toteId: string) => void,
  ) {
    const { errors } = topics(toteId)
    client.on('message', (topic, payload) => {
      if (topic !== errors) return
      this.stats.rejected++
      onRejected(parseRejection(payload), toteId)
    })
    client.on('close', () => void (this.stats.connected = false))
    client.on('connect', () => void (this.stats.connected = true))
  }

  /** Connects and subscribes to the tote's errors topic; rejects when the broker refuses the credentials. */
  static async connect(
    mqttUrl: string,
    { toteId, password }: ToteCredentials,
    onRejected: (rejection: Rejection, toteId: string) => void = () => {},
  ): Promise<SimulatedTote> {
    const client = await connectAsync(
      mqttUrl,
      {
        username: toteId,
        password,
        clientId: toteId,
        protocolVersion: MQTT_3_1_1,
        clean: true,
        reconnectPeriod: RECONNECT_MS,
        connectTimeout: 5_000,
      },
      false,
    )
    const tote = new SimulatedTote(toteId, client, onRejected)
    await client.subscribeAsync(topics(toteId).errors, { qos: 1 })
    return tote
  }

  /** Publishes readings (a batch when several) at QoS 1; resolves on the broker's PUBACK. */
  async publish(readings: SimulatedReading | readonly SimulatedReading[]): Promise<void> {
    const list = Array.isArray(readings) ? readings : [readings as SimulatedReading]
    for (let i = 0; i < list.length; i += MAX_BATCH) {
      const chunk = list
        .slice(i, i + MAX_BATCH)
        .map((r) => ({ ts: new Date(r.ts).toISOString(), temp_c: r.temp_c, battery: r.battery, seq: ++this.seq }))
      const payload = JSON.stringify(chunk.length === 1 ? chunk[0] : chunk)
      this.stats.sent += chunk.length
      await this.client.publishAsync(topics(this.toteId).readings, payload, { qos: 1 })
      this.stats.acked += chunk.length
    }
  }

  /** Publishes a payload as it is (to see how the service refuses a bad one). */
  async publishRaw(payload: string): Promise<void> {
    await this.client.publishAsync(topics(this.toteId).readings, payload, { qos: 1 })
  }

  async close(): Promise<void> {
    await this.client.endAsync()
  }
}

function parseRejection(payload: Buffer): Rejection {
  try {
    const parsed = JSON.parse(payload.toString('utf8')) as Partial<Rejection>
    return {
      error: String(parsed.error ?? 'rejected'),
      reason: String(parsed.reason ?? ''),
      ...(parsed.at ? { at: String(parsed.at) } : {}),
    }
  } catch {
    return { error: 'rejected', reason: payload.toString('utf8').slice(0, 200) }
  }
}
