import { connectAsync } from 'mqtt'

/**
 * Where the simulated totes publish: the broker the service itself names in
 * `GET /.well-known/rxtrace.json`, never a guessed port. Another broker on a guessed port (a local
 * Mosquitto on 1883) acknowledges every reading and stores none, and the scenario then looks
 * broken on the service's side: every delivery breaks for `sensor_gap`.
 */

type Discovery = { mqtt?: { mode?: string; tcp?: string | null; websocket?: string | null } }

/** The broker's URL, or an Error whose message says what is wrong and what to pass instead. */
export async function findBroker(serviceUrl: string, explicit: string | null): Promise<string> {
  const res = await fetch(new URL('/.well-known/rxtrace.json', serviceUrl)).catch(() => null)
  const doc = res?.ok ? ((await res.json().catch(() => null)) as Discovery | null) : null
  const offered = [doc?.mqtt?.tcp, doc?.mqtt?.websocket].filter((u): u is string => typeof u === 'string')
  if (explicit === null) {
    if (offered[0]) return offered[0]
    throw new Error(
      doc?.mqtt?.mode === 'external'
        ? `the service at ${serviceUrl} uses an external broker (MQTT_URL) without telling its address (MQTT_PUBLIC_URL); pass --mqtt`
        : `the service at ${serviceUrl} does not say where its MQTT broker is (GET /.well-known/rxtrace.json: ${res?.status ?? 'no answer'}); pass --mqtt`,
    )
  }
  // Ports, not host names: localhost and 127.0.0.1 are one host, but 1883 and 1884 are two brokers.
  if (offered.length > 0 && !offered.some((url) => sameEndpoint(url, explicit)))
    throw new Error(
      `--mqtt ${explicit} is not the broker of the service at ${serviceUrl}: it says totes connect at ${offered.join(' or ')}; drop --mqtt to use it`,
    )
  return explicit
}

/**
 * The service's broker refuses a tote's wrong password (an anonymous local Mosquitto would not):
 * checked once with the first tote before any reading is sent.
 */
export async function refusesStrangers(mqttUrl: string, toteId: string): Promise<boolean> {
  const client = await connectAsync(
    mqttUrl,
    {
      username: toteId,
      password: 'not-this-totes-password',
      clientId: `${toteId}-probe`,
      protocolVersion: 4,
      reconnectPeriod: 0,
      connectTimeout: 5_000,
    },
    false,
  ).catch(() => null)
  if (client === null) return true
  await client.endAsync()
  return false
}

function sameEndpoint(a: string, b: string): boolean {
  const [x, y] = [new URL(a), new URL(b)]
  const port = (u: URL) => u.port || { 'mqtt:': '1883', 'mqtts:': '8883', 'ws:': '80', 'wss:': '443' }[u.protocol]
  return x.protocol === y.protocol && port(x) === port(y)
}
