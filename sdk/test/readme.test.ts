import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ADMIN, listeningService } from './service.js'
import type { TestApi } from '../../test/helpers/service.js'

const sdkDir = fileURLToPath(new URL('..', import.meta.url))

describe('the README example', () => {
  let api: TestApi
  let baseUrl: string
  let dir: string
  beforeAll(async () => {
    ;({ api, baseUrl } = await listeningService())
    dir = await mkdtemp(join(sdkDir, 'test', '.readme-'))
  })
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true })
    await api?.stop()
  })

  it('is at most ten lines of code and works when pasted into a file and run with tsx', async () => {
    const readme = await readFile(join(sdkDir, 'README.md'), 'utf8')
    const example = readme.match(/```ts\n([\s\S]*?)```/)![1]!
    expect(
      example
        .trim()
        .split('\n')
        .filter((l) => l.trim() !== '').length,
    ).toBeLessThanOrEqual(10)
    const file = join(dir, 'example.ts')
    await writeFile(file, example)
    const admin = await api.adminToken()
    const pharmacy = await api.pharmacy(admin)
    const { fleetId, driverId } = await api.fleetWithDriver(admin)
    const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
    expect(
      (await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'signed' })).status,
    ).toBe(200)
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file], {
      cwd: dir,
      env: { ...process.env, RXTRACE_URL: baseUrl, RXTRACE_CLIENT_ID: ADMIN.id, RXTRACE_CLIENT_SECRET: ADMIN.secret },
    })
    expect(stdout).toMatch(/^fleet fl_\w+$/m)
    expect(stdout).toContain(`${rx.delivery_id} PICKED_UP UNMONITORED`)
  })

  it('installs from the packed tarball into a new CommonJS project, as the README says, and the example runs there as example.mts', async () => {
    const run = promisify(execFile)
    const repo = fileURLToPath(new URL('../..', import.meta.url))
    const scratch = await mkdtemp(join(tmpdir(), 'rxtrace-sdk-user-')) // outside the repository: no workspace to fall back on
    try {
      const { stdout: packed } = await run(process.execPath, ['--import', 'tsx', 'sdk/scripts/pack.ts', '--out', scratch], { cwd: repo })
      const tarball = packed.trim().split('\n').at(-1)!
      expect(tarball).toMatch(/rxtrace-sdk-[\d.]+\.tgz$/)
      const app = join(scratch, 'my-app')
      await run('mkdir', [app])
      await run('npm', ['init', '-y'], { cwd: app })
      // The SDK's two dependencies come from the npm cache when they are there (the registry otherwise).
      await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], { cwd: app })
      const readme = await readFile(join(sdkDir, 'README.md'), 'utf8')
      await writeFile(join(app, 'example.mts'), readme.match(/```ts\n([\s\S]*?)```/)![1]!)
      const admin = await api.adminToken()
      const pharmacy = await api.pharmacy(admin)
      const { fleetId, driverId } = await api.fleetWithDriver(admin)
      const rx = await api.prescription(admin, { pharmacy_id: pharmacy.id })
      await api.post(`/v1/deliveries/${rx.delivery_id}/dispatch`, admin, { fleet_id: fleetId, driver_id: driverId })
      await api.post(`/v1/deliveries/${rx.delivery_id}/pickup`, admin, { from: pharmacy.id, to: driverId, signature: 'signed' })
      // `npx tsx example.mts`, with the repository's tsx rather than a second download of it.
      const { stdout } = await run(join(repo, 'node_modules/.bin/tsx'), ['example.mts'], {
        cwd: app,
        env: { ...process.env, RXTRACE_URL: baseUrl, RXTRACE_CLIENT_ID: ADMIN.id, RXTRACE_CLIENT_SECRET: ADMIN.secret },
      })
      expect(stdout).toMatch(/^fleet fl_\w+$/m)
      expect(stdout).toContain(`${rx.delivery_id} PICKED_UP UNMONITORED`)
      // The package is JavaScript: plain node imports it, no TypeScript loader.
      const { stdout: names } = await run(
        process.execPath,
        ['--input-type=module', '-e', "console.log(typeof (await import('@rxtrace/sdk')).createRxtraceClient)"],
        { cwd: app },
      )
      expect(names.trim()).toBe('function')
    } finally {
      await rm(scratch, { recursive: true, force: true })
    }
  }, 240_000)
})
