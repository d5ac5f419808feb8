import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { childEnv, freePort, runUntilExit, startChildService } from '../helpers/child-service.js'
import { mosquittoAvailable, SERVICE_USER, startMosquitto, type Mosquitto } from '../helpers/mosquitto.js'

/**
 * A start that cannot come up says why in one line that names the variable to look at, not
 * the variable of whichever listener happened to fail first, nor a bare `ECONNREFUSED`.
 */

const dirs: string[] = []
const brokers: Mosquitto[] = []
afterAll(async () => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  for (const broker of brokers) await broker.dispose()
})

async function startWith(overrides: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-startup-'))
  dirs.push(dir)
  const result = await runUntilExit({ ...childEnv(dir, await freePort(), await freePort()), ...overrides })
  return { ...result, lines: result.stderr.split('\n').filter((line) => line.trim() !== '') }
}

describe('start-up errors name their cause', () => {
  it('HOST that is not an address of this machine blames HOST', async ({ annotate }) => {
    const { code, lines, stdout } = await startWith({ HOST: '999.1.1.1' })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^rxtrace: HOST=999\.1\.1\.1: /)
    expect(lines[0]).not.toContain('MQTT_PORT')
    await annotate(lines[0]!)
  }, 60_000)

  it('DATABASE_URL where nothing listens names DATABASE_URL (without its password) and the refusal', async ({ annotate }) => {
    const port = await freePort()
    const { code, lines, stdout } = await startWith({
      DATABASE_URL: `postgres://rx:hunter2@127.0.0.1:${port}/rxtrace`,
      SECRETS_KEY: randomBytes(32).toString('base64'),
    })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(
      /^rxtrace: DATABASE_URL=postgres:\/\/rx:\*\*\*@127\.0\.0\.1:\d+\/rxtrace: cannot reach PostgreSQL: .*ECONNREFUSED/,
    )
    expect(lines[0]).not.toContain('hunter2')
    await annotate(lines[0]!)
  }, 60_000)

  it('QUESTDB_CONFIG where nothing listens names QUESTDB_CONFIG and the refusal', async ({ annotate }) => {
    const port = await freePort()
    const { code, lines, stdout } = await startWith({ QUESTDB_CONFIG: `http::addr=127.0.0.1:${port};` })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^rxtrace: QUESTDB_CONFIG=http::addr=127\.0\.0\.1:\d+;: cannot reach QuestDB: .*ECONNREFUSED/)
    await annotate(lines[0]!)
  }, 60_000)

  // MQTT_URL: no embedded broker; the external one must be there, take these credentials, and
  // (to receive tote accounts) answer on its dynamic-security topic. MQTT_PORT: '' unsets childEnv's.
  it('MQTT_URL where nothing listens names MQTT_URL (without its password) and the refusal', async ({ annotate }) => {
    const port = await freePort()
    const { code, lines, stdout } = await startWith({ MQTT_PORT: '', MQTT_URL: `mqtt://rxtrace:hunter2@127.0.0.1:${port}` })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^rxtrace: MQTT_URL=mqtt:\/\/rxtrace:\*\*\*@127\.0\.0\.1:\d+: cannot reach the MQTT broker: .*ECONNREFUSED/)
    expect(lines[0]).not.toContain('hunter2')
    await annotate(lines[0]!)
  }, 60_000)

  it.skipIf(!mosquittoAvailable())(
    'MQTT_URL with a password the broker refuses says so',
    async ({ annotate }) => {
      const broker = await startMosquitto()
      brokers.push(broker)
      const { code, lines, stdout } = await startWith({ MQTT_PORT: '', MQTT_URL: broker.url(SERVICE_USER.username, 'not-the-password') })
      expect(code, stdout).not.toBe(0)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        /^rxtrace: MQTT_URL=mqtt:\/\/rxtrace:\*\*\*@127\.0\.0\.1:\d+\/?: the MQTT broker refused this user name and password/,
      )
      await annotate(lines[0]!)
    },
    60_000,
  )

  it.skipIf(!mosquittoAvailable())(
    'MQTT_URL on a broker without the dynamic-security plugin names the plugin and MQTT_PROVISIONING',
    async ({ annotate }) => {
      const broker = await startMosquitto({ dynsec: false })
      brokers.push(broker)
      const { code, lines, stdout } = await startWith({ MQTT_PORT: '', MQTT_URL: broker.serviceUrl })
      expect(code, stdout).not.toBe(0)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(
        /^rxtrace: MQTT_URL=mqtt:\/\/rxtrace:\*\*\*@127\.0\.0\.1:\d+\/?: the broker's dynamic-security plugin does not answer .*MQTT_PROVISIONING=off/,
      )
      await annotate(lines[0]!)
    },
    60_000,
  )

  it('MQTT_URL with MQTT_PORT set names MQTT_PORT: there is no embedded broker for it', async ({ annotate }) => {
    const { code, lines, stdout } = await startWith({ MQTT_PORT: '1884', MQTT_URL: 'mqtt://rxtrace:hunter2@127.0.0.1:1883' })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toBe(
      'rxtrace: invalid configuration: MQTT_PORT="1884": has no effect with MQTT_URL (no embedded broker runs); unset one of them',
    )
    await annotate(lines[0]!)
  }, 60_000)

  it('MQTT_URL without credentials names MQTT_URL', async () => {
    const { code, lines } = await startWith({ MQTT_PORT: '', MQTT_URL: 'mqtt://127.0.0.1:1883' })
    expect(code).not.toBe(0)
    expect(lines).toEqual([
      'rxtrace: invalid configuration: MQTT_URL="mqtt://127.0.0.1:1883": must look like mqtt://user:password@host:1883',
    ])
  }, 60_000)

  it('DATA_DIR that cannot be created names DATA_DIR, and does not spin (it used to, at 100 % CPU, on /proc/x)', async ({ annotate }) => {
    const { code, lines, stdout } = await startWith({ DATA_DIR: '/proc/rxtrace-data' })
    expect(code, stdout).not.toBe(0)
    expect(lines).toEqual([
      'rxtrace: DATA_DIR=/proc/rxtrace-data: cannot use it as the data directory (ENOENT); set DATA_DIR to a directory this user may create and write',
    ])
    await annotate(lines[0]!)
  }, 60_000)

  it('DATA_DIR under a file names DATA_DIR and why', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rxtrace-startup-'))
    dirs.push(dir)
    writeFileSync(join(dir, 'a-file'), '')
    const dataDir = join(dir, 'a-file', 'data')
    const { code, lines } = await startWith({ DATA_DIR: dataDir })
    expect(code).not.toBe(0)
    expect(lines).toEqual([
      `rxtrace: DATA_DIR=${dataDir}: cannot use it as the data directory (ENOTDIR); set DATA_DIR to a directory this user may create and write`,
    ])
  }, 60_000)

  it('a second service on the same DATA_DIR is refused, and told which process holds it', async ({ annotate }) => {
    const first = await startChildService()
    try {
      const { code, lines, stdout } = await runUntilExit(childEnv(first.dataDir, await freePort(), await freePort())).then((r) => ({
        ...r,
        lines: r.stderr.split('\n').filter((line) => line.trim() !== ''),
      }))
      expect(code, stdout).not.toBe(0)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(`^rxtrace: DATA_DIR=${first.dataDir}: in use by another rxtrace process \\(pid ${first.pid} on `))
      expect(lines[0]).toContain(`httpPort ${first.httpPort}`)
      expect(lines[0]).toMatch(/; stop it, or give this one its own DATA_DIR$/)
      await annotate(lines[0]!)
      // The first is unharmed, and once it has gone the directory is free again, even after a SIGKILL.
      expect((await first.request('GET', '/readyz')).status).toBe(200)
      await first.kill('SIGKILL')
      const again = await first.restart()
      expect((await again.request('GET', '/readyz')).status).toBe(200)
      await again.kill()
    } finally {
      await first.dispose()
    }
  }, 180_000)

  it('two listeners given one port names both variables', async ({ annotate }) => {
    const port = await freePort()
    const { code, lines } = await startWith({ PORT: String(port), MQTT_PORT: '0', MQTT_WS_PORT: String(port) })
    expect(code).not.toBe(0)
    expect(lines).toEqual([
      `rxtrace: invalid configuration: MQTT_WS_PORT="${port}": the same port as PORT=${port}; give each listener its own port`,
    ])
    await annotate(lines[0]!)
  }, 60_000)
})
