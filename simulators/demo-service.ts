import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../src/config.js'
import { buildService } from '../src/service.js'

/**
 * The whole service in-process for the demo: embedded SQLite stores in a temporary directory,
 * a fixed admin client, private webhook targets allowed, a 5 s reorder window and quick webhook
 * retries. The environment is not read (a DATABASE_URL meant for something else is not used);
 * LOG_LEVEL alone passes through. Prefers the usual ports (8080 HTTP, 1883 MQTT) and takes free ones when those are busy.
 */

export const DEMO_ADMIN = { clientId: 'cl_demo_admin', clientSecret: 'demo-admin-secret-not-for-production' }

const HOST = '127.0.0.1'

export type DemoService = {
  baseUrl: string
  mqttUrl: string
  /** Lines worth telling the user (ports that were busy). */
  notes: string[]
  stop(): Promise<void>
}

export async function startDemoService(): Promise<DemoService> {
  const notes: string[] = []
  const httpPort = await portOr(8080, 'HTTP', notes)
  const mqttPort = await portOr(1883, 'MQTT', notes)
  const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-demo-'))
  const config = loadConfig({
    PORT: String(httpPort),
    HOST,
    ISSUER: `http://${HOST}:${httpPort}`,
    MQTT_PORT: String(mqttPort),
    MQTT_WS_PORT: 'off',
    DATA_DIR: dataDir,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    REORDER_WINDOW_S: '5',
    WEBHOOK_RETRY_SCHEDULE: '1s,2s,5s',
    ADMIN_CLIENT_ID: DEMO_ADMIN.clientId,
    ADMIN_CLIENT_SECRET: DEMO_ADMIN.clientSecret,
    LOG_LEVEL: process.env.LOG_LEVEL ?? 'silent',
  })
  const service = await buildService(config)
  const cleanUp = async () => {
    await service.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  const ports = (await service.start()) as { httpPort: number; mqttPort?: number }
  if (typeof ports.mqttPort !== 'number') {
    await cleanUp()
    throw new Error('this build of the service starts no MQTT broker (start() returned no mqttPort); the demo needs one for its totes')
  }
  return { baseUrl: `http://${HOST}:${ports.httpPort}`, mqttUrl: `mqtt://${HOST}:${ports.mqttPort}`, notes, stop: cleanUp }
}

/** `preferred` when it is free on HOST, else one the OS picks (noted for the user). */
async function portOr(preferred: number, what: string, notes: string[]): Promise<number> {
  const tryListen = (port: number) =>
    new Promise<number | null>((resolve) => {
      const probe = createServer()
      probe.once('error', () => resolve(null))
      probe.listen(port, HOST, () => {
        const address = probe.address()
        probe.close(() => resolve(typeof address === 'object' && address ? address.port : null))
      })
    })
  if ((await tryListen(preferred)) !== null) return preferred
  const free = await tryListen(0)
  if (free === null) throw new Error(`no free port for ${what}`)
  notes.push(`port ${preferred} (${what}) is busy, so the demo uses ${free}`)
  return free
}
