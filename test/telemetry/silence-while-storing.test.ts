import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { MINUTE, testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { dispatchedColdChain } from '../trace/cold-chain-delivery.js'

describe('a tote whose reading is still being stored when its silence limit passes', () => {
  let api: TestApi
  const clock = testClock(Date.now() - 20 * MINUTE)
  // Writes wait for the test to let them through, as on a slow disk.
  let writing: (() => void) | null = null
  let held: Promise<void> | null = null
  beforeAll(async () => {
    const sqlite = createSqliteSink({ path: ':memory:' })
    const sink: ReadingSink = {
      ...sqlite,
      write: async (rows: readonly ReadingRow[]) => {
        if (held) await held
        return sqlite.write(rows)
      },
    }
    api = await startTestService({}, { clock, sink })
  })
  afterAll(() => api.stop())

  it('is not announced offline: it spoke before the limit', async () => {
    // Refrigerated: 15 minutes without a reading is a sensor gap. Bound 13 minutes ago, silent since.
    const trip = await dispatchedColdChain(api, clock, Date.now() - 13 * MINUTE)
    const sentAt = clock.now()
    held = new Promise<void>((resolve) => (writing = resolve))
    const handled = api.service.pipeline.handle(trip.tote.id, Buffer.from(JSON.stringify([{ ts: sentAt, temp_c: 5 }])))
    // The limit passes while the reading waits for its commit, and the silence check runs.
    clock.set(sentAt + 3 * MINUTE)
    await waitFor(() => api.service.monitor.state(trip.deliveryId) !== undefined, 5_000, 'the delivery watched')
    api.service.monitor.tick()
    writing!()
    held = null
    await handled
    await api.service.monitor.flush()

    const admin = await api.adminToken()
    const events = (await api.get(`/v1/events?delivery_id=${trip.deliveryId}`, admin)).body.data.map((e: { type: string }) => e.type)
    expect(events).not.toContain('sensor.offline')
    expect((await api.get(`/v1/deliveries/${trip.deliveryId}`, admin)).body.cold_chain).toMatchObject({ state: 'OK', min_c: 5 })
  })
})
