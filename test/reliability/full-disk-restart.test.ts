import { unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { childEnv, freePort, runUntilExit, startChildService, type ChildService } from '../helpers/child-service.js'
import { fillUp, smallDisk } from '../helpers/tmpfs.js'

// A real full disk: a 20 MiB tmpfs as DATA_DIR.
const { dir, mounted, unmount } = smallDisk('rxtrace-full-restart-', '20m', 'the full-disk restart test')

describe.skipIf(!mounted)('a restart while the disk under DATA_DIR is full', () => {
  const services: ChildService[] = []
  afterAll(async () => {
    for (const service of services) await service.kill('SIGKILL')
    if (mounted) unmount()
  })

  it('comes up after a crash, not ready for the disk; after a clean stop it says to free space in DATA_DIR', async () => {
    const env = { DISK_FREE_MIN_MB: '0.5' }
    const first = await startChildService({ dataDir: dir, env })
    services.push(first)
    await first.kill('SIGKILL') // a crash, an OOM kill: the stores' shared-memory files stay
    const filler = join(dir, 'filler')
    fillUp(filler)

    // Reads need nothing new on disk: the service starts and says what is wrong.
    const second = await first.restart({}, { upWhenNotReady: true })
    services.push(second)
    const ready = await second.request('GET', '/readyz')
    expect(ready.status).toBe(503)
    expect(ready.body).toMatchObject({ code: 'not_ready', checks: { disk: 'full' } })
    expect((await second.get('/v1/pharmacies', await second.adminToken())).status).toBe(200)
    expect(await second.kill('SIGTERM')).toMatchObject({ code: 0 })

    // A clean stop removed those files, and SQLite cannot make them again on a full disk.
    const third = await runUntilExit(childEnv(dir, await freePort(), await freePort(), env))
    expect(third.code).toBe(1)
    expect(third.stderr.trim()).toMatch(
      new RegExp(`^rxtrace: failed to start: DATA_DIR=${dir}: .+: free some space there and start again$`),
    )

    unlinkSync(filler)
    const fourth = await first.restart()
    services.push(fourth)
    expect((await fourth.request('GET', '/readyz')).status).toBe(200)
  })
})
