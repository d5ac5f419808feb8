import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import mqtt from 'mqtt'
import pino from 'pino'
import { afterEach, describe, expect, it } from 'vitest'
import { loadConfig } from '../../src/config.js'
import { buildService } from '../../src/service.js'
import { TEST_ENV, withApi } from '../helpers/service.js'

const mode = (path: string) => `0${(statSync(path).mode & 0o777).toString(8)}`

/** Every path under `dir`, itself included, with its permission bits. */
function modes(dir: string): Record<string, string> {
  const found: Record<string, string> = { '.': mode(dir) }
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    const path = join(entry.parentPath, entry.name)
    found[path.slice(dir.length + 1)] = mode(path)
  }
  return found
}

describe("data files are readable by the service's user only", () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  /** The whole service on SQLite files in `dataDir`, listening on ephemeral ports; a log that the test can read. */
  async function startOn(dataDir: string) {
    const lines: { msg: string; path?: string; was?: string }[] = []
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk, _enc, done) {
          lines.push(JSON.parse(String(chunk)))
          done()
        },
      }),
    )
    const config = loadConfig({ ...TEST_ENV, DATA_DIR: dataDir, LOG_LEVEL: 'warn' })
    const api = withApi(await buildService(config, { logger }))
    const ports = await api.service.start()
    return { api, ports, lines }
  }

  it('creates the data directory 0700 and every file in it 0600, WAL and shared-memory files included', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'rxtrace-modes-'))
    dirs.push(parent)
    const dataDir = join(parent, 'data', 'nested')
    const { api, ports } = await startOn(dataDir)
    try {
      // Write to both stores, so each has its -wal and -shm files: a tote, and a reading from it.
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const tote = await api.tote(admin, { pharmacy_id: pharmacy.id })
      const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${ports.mqttPort}`, {
        username: tote.mqtt.username,
        password: tote.mqtt.password,
        clientId: tote.id,
        reconnectPeriod: 0,
      })
      await client.publishAsync(`rxtrace/v1/totes/${tote.id}/readings`, JSON.stringify({ ts: Date.now(), temp_c: 4.5 }), { qos: 1 })
      await client.endAsync()

      const found = modes(dataDir)
      expect(Object.keys(found)).toEqual(
        expect.arrayContaining(['rxtrace.db', 'rxtrace.db-wal', 'rxtrace.db-shm', 'readings.db', 'readings.db-wal', 'readings.db-shm']),
      )
      for (const [path, bits] of Object.entries(found)) {
        expect(bits, path).toBe(path === '.' || statSync(join(dataDir, path)).isDirectory() ? '0700' : '0600')
      }
      // The parents it had to create as well.
      expect(mode(join(parent, 'data'))).toBe('0700')
    } finally {
      await api.stop()
    }
  })

  it('narrows a data directory and files left wider by an earlier version, and says so', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-modes-'))
    dirs.push(dataDir)
    chmodSync(dataDir, 0o755)
    writeFileSync(join(dataDir, 'rxtrace.db'), '')
    chmodSync(join(dataDir, 'rxtrace.db'), 0o644)
    const { api, lines } = await startOn(dataDir)
    try {
      expect(mode(dataDir)).toBe('0700')
      expect(mode(join(dataDir, 'rxtrace.db'))).toBe('0600')
      for (const file of ['rxtrace.db-wal', 'rxtrace.db-shm', 'readings.db']) expect(mode(join(dataDir, file)), file).toBe('0600')
      expect(lines).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ path: dataDir, was: '0755' }),
          expect.objectContaining({ path: join(dataDir, 'rxtrace.db'), was: '0644' }),
        ]),
      )
    } finally {
      await api.stop()
    }
  })
})
