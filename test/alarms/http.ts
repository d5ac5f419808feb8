import mqtt from 'mqtt'

/** JSON over a real socket to a started service. */
export function httpClient(port: number) {
  return async function http<T = any>(
    method: string,
    path: string,
    token: string,
    body?: unknown,
  ): Promise<{ status: number; body: T; text: string }> {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    })
    const text = await res.text()
    return { status: res.status, body: (text ? JSON.parse(text) : null) as T, text }
  }
}
export type Http = ReturnType<typeof httpClient>

/** No grace, so one reading out of range is an excursion; long limits, so it does not break. */
export const QUICK_PROFILE = {
  name: 'alarm-quick',
  min_c: 2,
  max_c: 8,
  grace_s: 0,
  max_excursion_s: 3_600,
  max_cumulative_s: 7_200,
  hard_min_c: null,
  hard_max_c: 30,
  mkt_max_c: null,
  max_gap_s: null,
}

export type Tote = { id: string; mqtt: { username: string; password: string } }

/** A tote publishing its own readings over MQTT (QoS 1: resolved once the service has stored them). */
export async function toteClient(mqttPort: number, tote: Tote) {
  const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${mqttPort}`, {
    username: tote.mqtt.username,
    password: tote.mqtt.password,
    clientId: tote.id,
    reconnectPeriod: 0,
  })
  let ts = Date.now()
  return {
    client,
    /** One reading, a little after the previous one. */
    send: (temp_c: number) => {
      ts = Math.max(ts + 1_000, Date.now())
      return client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts, temp_c }), { qos: 1 })
    },
    end: () => client.endAsync(),
  }
}
