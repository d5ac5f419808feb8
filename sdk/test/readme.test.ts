import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
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
})
