import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { childEnv, freePort, runUntilExit } from '../helpers/child-service.js'

/**
 * A start that cannot come up says why in one line that names the variable to look at, not
 * the variable of whichever listener happened to fail first, nor a bare `ECONNREFUSED`.
 */

const dirs: string[] = []
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
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
    const { code, lines, stdout } = await startWith({ DATABASE_URL: `postgres://rx:hunter2@127.0.0.1:${port}/rxtrace` })
    expect(code, stdout).not.toBe(0)
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^rxtrace: DATABASE_URL=postgres:\/\/rx:\*\*\*@127\.0\.0\.1:\d+\/rxtrace: cannot reach PostgreSQL: .*ECONNREFUSED/)
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
})
