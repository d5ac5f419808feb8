import { createServer as createHttpServer } from 'node:http'
import { createServer as createTcpServer, type Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { IncomingMessage } from 'node:http'
import { createWebSocketStream, WebSocketServer } from 'ws'
import { closeServer, listen } from '../src/listen.js'

/** Hands a connection's byte stream to the broker (aedes' `handle`). */
export type HandleConnection = (stream: Duplex, request?: IncomingMessage) => void

/** `close()` stops accepting at once and resolves when the last connection is gone (the broker ends them). */
export type Listener = { port: number; close(): Promise<void> }

/** MQTT over WebSocket lives at this path (README, Configuration: MQTT_WS_PORT), as with Mosquitto and EMQX defaults. */
const WS_PATH = '/mqtt'
/**
 * Largest WebSocket message accepted: a 500-reading batch is ~100 KiB; ws' default is 100 MiB.
 * Raised to fit one whole MQTT packet when the packet limit is larger. (A packet may also span
 * several messages: the packet limit is enforced on the MQTT stream, not here.)
 */
const WS_MAX_PAYLOAD = 1024 * 1024
/** A fixed header: one type byte and up to four bytes of remaining length [MQTT-2.2]. */
const MAX_FIXED_HEADER = 5

/** MQTT over TCP. Nagle off: a PUBACK is tiny and the tote is waiting for it. */
export async function listenTcp(handle: HandleConnection, port: number, host?: string): Promise<Listener> {
  const server = createTcpServer((socket: Socket) => {
    socket.setNoDelay(true)
    handle(socket)
  })
  const bound = await listen(server, port, host ?? '0.0.0.0', 'MQTT_PORT')
  return { port: bound, close: () => closeServer(server) }
}

/** MQTT over WebSocket at /mqtt (gateways behind HTTP proxies). Other paths get 404. */
export async function listenWebSocket(handle: HandleConnection, port: number, host?: string, maxPacketBytes = 0): Promise<Listener> {
  const http = createHttpServer((_req, res) => {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`MQTT over WebSocket is at ${WS_PATH}\n`)
  })
  const bound = await listen(http, port, host ?? '0.0.0.0', 'MQTT_WS_PORT')
  // Attached after binding: it re-emits the HTTP server's errors, and a bind error is ours to report.
  const wss = new WebSocketServer({ server: http, path: WS_PATH, maxPayload: Math.max(WS_MAX_PAYLOAD, maxPacketBytes + MAX_FIXED_HEADER) })
  wss.on('connection', (ws, request) => {
    ;(request.socket as Socket).setNoDelay(true)
    handle(createWebSocketStream(ws), request)
  })
  return {
    port: bound,
    async close() {
      wss.close() // stops upgrades; open WebSockets stay until the broker disconnects them
      await closeServer(http)
    },
  }
}
