import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { childEnv, freePort, runUntilExit, startChildService, type ChildService } from '../helpers/child-service.js'
import { waitFor } from '../helpers/wait.js'

/**
 * The first start prints the generated admin client's secret once. A first start that fails
 * (a port already taken) must not have created that client already: the next, successful start
 * prints it.
 */

const dirs: string[] = []
const children: ChildService[] = []
afterAll(async () => {
  for (const child of children) await child.dispose()
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
})

/** No pinned admin (empty values count as unset), so the service generates one. */
const UNPINNED = { ADMIN_CLIENT_ID: '', ADMIN_CLIENT_SECRET: '' }

/** A command line run by the shell, as an operator pastes it; its stdout. */
const run = (command: string) =>
  new Promise<string>((resolve, reject) =>
    execFile('sh', ['-c', command], { timeout: 20_000 }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
  )

describe('first start', () => {
  it('shows the admin secret on the first start that comes up, even after one that failed', async ({ annotate }) => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-first-'))
    dirs.push(dataDir)
    const httpPort = await freePort()
    const blocker: Server = createServer()
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
    const mqttPort = (blocker.address() as { port: number }).port

    const failed = await runUntilExit(childEnv(dataDir, httpPort, mqttPort, UNPINNED))
    expect(failed.code).not.toBe(0)
    const lines = failed.stderr.split('\n').filter((l) => l.trim() !== '')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(new RegExp(`MQTT_PORT=${mqttPort}: port ${mqttPort} is already in use`))
    expect(failed.stderr + failed.stdout).not.toContain('client_secret')

    await new Promise((resolve) => blocker.close(resolve))
    const svc = await startChildService({ dataDir, httpPort, mqttPort, env: UNPINNED })
    children.push(svc)
    // The banner follows the listeners binding, so it may land just after /readyz first answers.
    await waitFor(() => svc.stderr.includes('client_secret'), 10_000, 'the first-start banner')
    const id = /client_id:\s+(cl_\S+)/.exec(svc.stderr)?.[1]
    const secret = /client_secret:\s+(cs_\S+)/.exec(svc.stderr)?.[1]
    expect(id, svc.stderr).toBeDefined()
    expect(secret).toBeDefined()
    expect(svc.stdout, 'the banner is on stderr, not in the log stream').not.toContain('client_secret')

    const res = await fetch(`${svc.baseUrl}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`,
      },
      body: 'grant_type=client_credentials',
    })
    expect(res.status).toBe(200)
    await annotate(`failed start: ${lines[0]}; the next start printed ${id}`)
  }, 120_000)

  it('prints the banner once, with a curl command that gets a token as pasted; a restart prints nothing', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'rxtrace-banner-'))
    dirs.push(dataDir)
    // LOG_LEVEL info: "rxtrace started" is logged in the same tick as the banner would be printed.
    const env = { ...UNPINNED, LOG_LEVEL: 'info' }
    const first = await startChildService({ dataDir, env })
    children.push(first)
    await waitFor(() => first.stderr.includes('curl '), 10_000, 'the first-start banner')
    const banner = first.stderr
    expect(banner.match(/client_secret:/g)).toHaveLength(1)
    const curl = banner
      .split('\n')
      .find((l) => l.trimStart().startsWith('curl '))!
      .trim()
    expect(curl).toContain(`http://localhost:${first.httpPort}/oauth/token`) // ISSUER's default follows PORT

    // The command as an operator pastes it into a shell.
    const answer = await run(curl)
    const token = (JSON.parse(answer) as { access_token: string; token_type: string }).access_token
    expect(token).toMatch(/^eyJ/)
    expect((await first.get('/v1/pharmacies', token)).status).toBe(200)

    expect(await first.kill('SIGTERM')).toEqual({ code: 0, signal: null })
    const second = await first.restart()
    children.push(second)
    await waitFor(() => second.stdout.includes('"rxtrace started"'), 10_000, 'the second start logged')
    expect(second.stderr).not.toContain('client_secret')
    expect(second.stderr).not.toContain('curl')
    // The printed secret still works: the first start's client is kept, not replaced.
    const again = await run(curl) // the restart listens on the same port
    expect(JSON.parse(again)).toMatchObject({ token_type: 'Bearer' })
  }, 150_000)
})
