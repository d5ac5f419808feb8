import { Hono } from 'hono'
import type { AppEnv } from '../env.js'

/** Where totes connect, known once the listeners are bound (MQTT_PORT=0 picks a free port). */
export type MqttEndpoints = {
  /** The embedded broker's ports; null with MQTT_URL, where nothing here listens for MQTT. */
  tcpPort: number | null
  wsPort: number | null
  /** With MQTT_URL: the external broker's address as totes reach it (MQTT_PUBLIC_URL), if the operator gave one. */
  publicUrl: string | null
}

/**
 * `GET /.well-known/rxtrace.json`, no token: the service's own addresses, so a tool (the
 * simulators, a tote's setup script) asks the service where its MQTT broker is instead of
 * guessing a port that another broker (a local Mosquitto on 1883) may hold. The embedded broker's
 * URLs use the host name the request reached this service at: the broker listens on the same
 * interfaces as the HTTP API.
 */
export function discoveryRoutes({ issuer, mqtt }: { issuer: string; mqtt: () => MqttEndpoints | null }) {
  const app = new Hono<AppEnv>()
  app.get('/.well-known/rxtrace.json', (c) => {
    const endpoints = mqtt()
    const host = bracketed(new URL(c.req.url).hostname)
    const embedded = endpoints?.tcpPort != null
    return c.json({
      issuer,
      api: `${issuer}/v1`,
      openapi: `${issuer}/v1/openapi.json`,
      console: `${issuer}/console/`,
      mqtt: {
        mode: endpoints === null ? 'starting' : embedded ? 'embedded' : 'external',
        tcp: embedded ? `mqtt://${host}:${endpoints.tcpPort}` : (endpoints?.publicUrl ?? null),
        websocket: embedded && endpoints.wsPort !== null ? `ws://${host}:${endpoints.wsPort}/mqtt` : null,
        readings_topic: 'rxtrace/v1/totes/{tote_id}/readings',
        errors_topic: 'rxtrace/v1/totes/{tote_id}/errors',
      },
    })
  })
  return app
}

// RFC 3986 §3.2.2: an IPv6 literal goes in brackets (URL.hostname already has them; a bare one from elsewhere would not).
const bracketed = (host: string) => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host)
