import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { childEnv, freePort, runUntilExit } from '../helpers/child-service.js'

/**
 * Start-up failures an operator must be able to act on from one line (SPEC §1): a port already
 * in use, a bad configuration value. The process exits non-zero and stderr holds exactly one
 * line naming the variable.
 */

const dirs: string[] = []
const blockers: Server[] = []
afterAll(async () => {
  await Promise.all(blockers.map((s) => new Promise((resolve) => s.close(resolve))))
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** A port held by another process's listener (here: ours), on the interface the service binds. */
async function takenPort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  blockers.push(server)
  return (server.address() as { port: number }).port
}

async function startWith(overrides: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-port-'))
  dirs.push(dir)
  const env = { ...childEnv(dir, await freePort(), await freePort()), ...overrides }
  const result = await runUntilExit(env)
  return { ...result, lines: result.stderr.split('\n').filter((line) => line.trim() !== '') }
}

describe('start-up refuses with one clear line', () => {
  for (const variable of ['PORT', 'MQTT_PORT', 'MQTT_WS_PORT'] as const) {
    it(`${variable} already in use: exits non-zero naming ${variable} and the port`, async ({ annotate }) => {
      const port = await takenPort()
      const { code, lines, stdout } = await startWith({ [variable]: String(port) })
      expect(code, stdout).not.toBe(0)
      expect(lines, 'stderr').toHaveLength(1)
      // `PORT=` must not be matched inside `MQTT_PORT=`.
      expect(lines[0]).toMatch(new RegExp(`(^|[^A-Z_])${variable}=${port}: port ${port} is already in use`))
      await annotate(lines[0]!)
    }, 45_000)
  }

  for (const [variable, value] of [
    ['TOKEN_TTL_S', 'abc'],
    ['PORT', 'eighty'],
  ] as const) {
    it(`${variable}=${value}: exits non-zero with one line naming ${variable}`, async ({ annotate }) => {
      const { code, lines, stdout } = await startWith({ [variable]: value })
      expect(code, stdout).not.toBe(0)
      expect(lines, 'stderr').toHaveLength(1)
      expect(lines[0]).toMatch(new RegExp(`(^|[^A-Z_])${variable}=`))
      expect(lines[0]).toContain(value)
      await annotate(lines[0]!)
    }, 45_000)
  }
})
