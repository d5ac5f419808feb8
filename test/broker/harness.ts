import mqtt, { type IClientOptions, type MqttClient } from 'mqtt'
import { pino } from 'pino'
import { onTestFinished } from 'vitest'
import { createBroker, PayloadRefusedError, type BrokerDeps, type RxBroker } from '../../broker/index.js'
import { parseReadings, type ParsedReading } from '../../src/telemetry/parse.js'

/** The broker tests' totes and their passwords. */
export const PASSWORDS: Record<string, string> = { tt_alpha: 'alpha-secret', tt_bravo: 'bravo-secret' }
export const readings = (tote: string) => `rxtrace/v1/totes/${tote}/readings`
export const errors = (tote: string) => `rxtrace/v1/totes/${tote}/errors`
export const aReading = () => JSON.stringify({ ts: Date.now(), temp_c: 4.5 })

export type Stored = { toteId: string; readings: ParsedReading[]; qos: 0 | 1 }

/** A broker whose ingest parses and keeps readings in memory, like the real one minus storage. */
export async function startBroker(over: Partial<BrokerDeps> = {}) {
  const stored: Stored[] = []
  const broker = await createBroker({
    authenticateTote: async (username, password) => (PASSWORDS[username] === password.toString() ? username : null),
    onReadings: async (toteId, payload, qos) => {
      const parsed = parseReadings(payload, Date.now())
      if (!parsed.ok) throw new PayloadRefusedError(parsed.code, parsed.reason)
      stored.push({ toteId, readings: parsed.readings, qos })
    },
    logger: pino({ level: 'silent' }),
    tcpPort: 0,
    wsPort: 0,
    host: '127.0.0.1',
    ...over,
  })
  // Registered per call, not at module level: a module is loaded once for every file a worker runs.
  onTestFinished(() => broker.close())
  return { broker, stored }
}

/** An mqtt.js client for `tote`, ended after the test. */
export async function connectTote(url: string, tote: string, password = PASSWORDS[tote], options: IClientOptions = {}) {
  const client = await mqtt.connectAsync(url, {
    protocolVersion: 4,
    clientId: tote,
    username: tote,
    password,
    reconnectPeriod: 0,
    connectTimeout: 5_000,
    ...options,
  })
  onTestFinished(() => client.endAsync(true))
  return client
}
export const tcp = (broker: RxBroker) => `mqtt://127.0.0.1:${broker.tcpPort}`

export const closed = (client: MqttClient) => new Promise<void>((resolve) => client.once('close', () => resolve()))
