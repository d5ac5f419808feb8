import { Agent, request } from 'node:http'
import { afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * SIGTERM while HTTP clients keep their connections alive and keep sending: the service stops
 * accepting, answers what is running with `Connection: close`, and exits 0 — which it does only
 * when it stopped within its own 10 s deadline (otherwise it exits 1).
 *
 * On Node 20.20 a separate client process's keep-alive connections also ended without the
 * explicit draining (server.close() closes the idle ones, and these clients leave them idle
 * between requests), so this guards the behaviour rather than reproducing a failure; a client
 * in the same process as the server, always mid-request, is where server.close() alone never
 * completes.
 */

/** Concurrent keep-alive clients, each sending its next request as soon as the last is answered. */
const CLIENTS = 8

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.dispose()
})

/** One request over `agent`; resolves with the status, or null once the service is gone. */
function get(agent: Agent, port: number, path: string): Promise<{ status: number; connection: string | undefined } | null> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection }))
      res.on('error', () => resolve(null))
    })
    req.on('error', () => resolve(null))
    req.end()
  })
}

/** A refused client waits a little before it tries again, as real clients do (not a test waiting for something). */
const clientRetryPause = () => new Promise((resolve) => setTimeout(resolve, 20))

describe('SIGTERM with keep-alive HTTP clients hammering the API', () => {
  it('closes their connections and exits 0', async ({ annotate }) => {
    const svc = await startChildService()
    children.push(svc)
    const agent = new Agent({ keepAlive: true, maxSockets: CLIENTS })
    let answered = 0
    let closeAnnounced = 0
    let running = true
    const hammer = async () => {
      while (running) {
        const reply = await get(agent, svc.httpPort, '/healthz')
        if (reply === null) {
          // Refused: the listener is closed. Keep trying until the process is gone, as a client would.
          await clientRetryPause()
          continue
        }
        answered++
        if (reply.connection === 'close') closeAnnounced++
      }
    }
    const clients = Array.from({ length: CLIENTS }, hammer)
    await waitFor(() => answered >= 200, 15_000, '200 answers before the SIGTERM')

    const answeredBefore = answered
    process.kill(svc.pid, 'SIGTERM')
    const exit = await svc.exited
    running = false
    await Promise.all(clients)
    agent.destroy()

    expect(exit).toEqual({ code: 0, signal: null })
    await annotate(
      `${answered} requests answered, ${answered - answeredBefore} after SIGTERM; ${closeAnnounced} answers carried Connection: close`,
    )
  }, 60_000)
})
