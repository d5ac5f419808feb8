import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import { resolve } from 'node:path'

/** `MQTT_URL` split into where to connect and as whom (the credentials are not part of the address mqtt.js gets). */
export type BrokerAddress = { url: string; host: string; port: number; username: string; password: string }

export function brokerAddress(mqttUrl: string): BrokerAddress {
  const parsed = new URL(mqttUrl)
  const secure = parsed.protocol === 'mqtts:'
  const port = parsed.port ? Number(parsed.port) : secure ? 8883 : 1883 // IANA: mqtt 1883, secure-mqtt 8883
  return {
    url: `${parsed.protocol}//${parsed.hostname}:${port}`,
    host: parsed.hostname,
    port,
    username: decodeURIComponent(parsed.username),
    password: decodeURIComponent(parsed.password),
  }
}

/**
 * This copy's client id prefix when `MQTT_CLIENT_ID` is not set: stable across restarts on one
 * machine with one data directory, so a restarted copy resumes its persistent session; two
 * copies on one machine differ by their `DATA_DIR`.
 */
export function defaultClientId(dataDir: string): string {
  const host = hostname()
    .replace(/[^A-Za-z0-9_.]/g, '_')
    .slice(0, 30)
  return `rxtrace_${host}_${createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 8)}`
}
