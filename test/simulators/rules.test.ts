import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readingsBetween, type ScenarioName } from '../../simulators/scenarios.js'
import { testClock } from '../helpers/clock.js'
import { startTestService, type TestApi } from '../helpers/service.js'
import { dispatchedColdChain, feed } from '../trace/cold-chain-delivery.js'

const HOUR = 3_600_000

describe('simulated trips through the ingest pipeline', () => {
  let api: TestApi
  // The service (and its signing key) starts before the trips it is told about, as in real life.
  const clock = testClock(Date.now() - 3 * HOUR)
  beforeAll(async () => {
    api = await startTestService({}, { clock })
  })
  afterAll(() => api.stop())

  /** A two-hour trip that ended a minute ago, uploaded by the tote's gateway; the event types it raised. */
  async function eventsOf(name: ScenarioName): Promise<string[]> {
    const start = Date.now() - 2 * HOUR - 60_000
    const trip = await dispatchedColdChain(api, clock, start)
    await feed(api, trip.tote.id, readingsBetween(name, 11, start, start + 2 * HOUR, 30_000))
    const admin = await api.adminToken()
    const events = (await api.get(`/v1/events?delivery_id=${trip.deliveryId}&limit=100`, admin)).body.data
    return events.map((e: { type: string; data: { reason?: string } }) => (e.data.reason ? `${e.type}:${e.data.reason}` : e.type))
  }

  it('a compressor failure breaks the cold chain', async () => {
    expect(await eventsOf('compressor-failure')).toEqual(
      expect.arrayContaining(['temperature.excursion', 'cold-chain.break:excursion_too_long']),
    )
  })

  it('a freeze breaks it at the hard limit', async () => {
    expect(await eventsOf('freeze')).toContain('cold-chain.break:hard_limit')
  })

  it('a normal trip and door openings raise no break', async () => {
    for (const name of ['normal', 'door-open'] as const) {
      const events = await eventsOf(name)
      expect(
        events.filter((e) => e.startsWith('cold-chain.break') || e === 'temperature.excursion'),
        name,
      ).toEqual([])
    }
  })
})
