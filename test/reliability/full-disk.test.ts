import { unlinkSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { fillUp, smallDisk } from '../helpers/tmpfs.js'

// A real full disk: a 4 MiB tmpfs as DATA_DIR.
const { dir, mounted, unmount } = smallDisk('rxtrace-full-disk-', '4m', 'the full-disk test')

describe.skipIf(!mounted)('a full disk under DATA_DIR', () => {
  let api: TestApi
  beforeAll(async () => {
    api = await startTestService(
      { DATA_DIR: dir, DISK_FREE_MIN_MB: '0.5' },
      {
        store: { kind: 'sqlite', file: join(dir, 'rxtrace.db') },
        sink: createSqliteSink({ path: join(dir, 'readings.db') }),
      },
    )
  })
  afterAll(async () => {
    await api?.stop()
    if (mounted) unmount()
  })

  it('makes /readyz answer 503 until space is freed', async () => {
    const admin = await api.adminToken()
    expect((await api.request('GET', '/readyz')).status).toBe(200)

    const filler = join(dir, 'filler')
    fillUp(filler)
    const full = await api.request('GET', '/readyz')
    expect(full.status).toBe(503)
    expect(full.body).toMatchObject({ code: 'not_ready', checks: { disk: 'full' } })
    // A write may still fit in pages SQLite already has; one that does not is refused with a
    // 503 (nothing changed, try later), never a bare 500.
    const write = await api.post('/v1/pharmacies', admin, {
      name: 'x'.repeat(200),
      address: { line1: '1 Main St', city: 'Springfield', region: 'IL', postal_code: '62701', country: 'US' },
      timezone: 'America/Chicago',
    })
    if (write.status !== 201) expect(write.body).toMatchObject({ status: 503, code: 'not_ready' })

    unlinkSync(filler)
    expect((await api.request('GET', '/readyz')).status).toBe(200)
    expect((await api.pharmacy(admin)).id).toMatch(/^ph_/)
  })
})
