import { OpenAPIHono } from '@hono/zod-openapi'
import type { AppEnv } from '../env.js'
import { json, publicRoute, z } from '../openapi.js'

/** Where totes connect, known once the listeners are bound (MQTT_PORT=0 picks a free port). */
export type MqttEndpoints = {
  /** The embedded broker's ports; null with MQTT_URL, where nothing here listens for MQTT. */
  tcpPort: number | null
  wsPort: number | null
  /** With MQTT_URL: the external broker's address as totes reach it (MQTT_PUBLIC_URL), if the operator gave one. */
  publicUrl: string | null
}

const Discovery = z
  .object({
    issuer: z.string(),
    api: z.string(),
    openapi: z.string(),
    console: z.string(),
    mqtt: z.object({
      mode: z.enum(['embedded', 'external', 'starting']),
      tcp: z.string().nullable().describe('Where totes connect over TCP; with MQTT_URL, MQTT_PUBLIC_URL or null'),
      websocket: z.string().nullable().describe('The embedded broker over WebSocket; null when off or with MQTT_URL'),
      readings_topic: z.string(),
      errors_topic: z.string(),
    }),
  })
  .openapi('ServiceDiscovery')

/**
 * `GET /.well-known/rxtrace.json`, no token: the service's own addresses, so a tool (the
 * simulators, a tote's setup script) asks the service where its MQTT broker is instead of
 * guessing a port that another broker (a local Mosquitto on 1883) may hold. The embedded broker's
 * URLs use the host name the request reached this service at: the broker listens on the same
 * interfaces as the HTTP API.
 */
export function discoveryRoutes({ issuer, mqtt }: { issuer: string; mqtt: () => MqttEndpoints | null }) {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    publicRoute({
      method: 'get',
      path: '/.well-known/rxtrace.json',
      operationId: 'getServiceDiscovery',
      tags: ['Operations'],
      summary: "The service's addresses: API, console, and where totes connect over MQTT",
      responses: { 200: json(Discovery, 'The addresses') },
    }),
    (c) => {
      const endpoints = mqtt()
      const host = new URL(c.req.url).host.replace(/:\d+$/, '') // keeps an IPv6 literal's brackets (RFC 3986 §3.2.2)
      const tcpPort = endpoints?.tcpPort ?? null
      const wsPort = endpoints?.wsPort ?? null
      return c.json(
        {
          issuer,
          api: `${issuer}/v1`,
          openapi: `${issuer}/v1/openapi.json`,
          console: `${issuer}/console/`,
          mqtt: {
            mode: endpoints === null ? ('starting' as const) : tcpPort !== null ? ('embedded' as const) : ('external' as const),
            tcp: tcpPort !== null ? `mqtt://${host}:${tcpPort}` : (endpoints?.publicUrl ?? null),
            websocket: tcpPort !== null && wsPort !== null ? `ws://${host}:${wsPort}/mqtt` : null,
            readings_topic: 'rxtrace/v1/totes/{tote_id}/readings',
            errors_topic: 'rxtrace/v1/totes/{tote_id}/errors',
          },
        },
        200,
      )
    },
  )
  return app
}
