import { afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { closed, connectTote, dispatchedColdChain, publishUnits, readingsTopicOf, storedTimestamps, toUnits } from './fixtures.js'

/**
 * SIGTERM while a tote streams (SPEC §1): stop accepting, finish in-flight work, flush
 * telemetry, close the broker, exit 0 within 10 s — and nothing acknowledged is lost.
 */

/** 60,000 readings 4 ms apart: 240 s of event time, within the 5 minutes a reading may be ahead. */
const READINGS = 60_000
const STEP_MS = 4
/** The stop comes once this many readings are acknowledged: well inside the stream. */
const SIGTERM_AFTER = 10_000
/** SPEC §1. */
const STOP_DEADLINE_MS = 10_000

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.dispose()
})

describe('SIGTERM while a tote streams QoS 1 readings', () => {
  it('exits 0 within 10 s and every acknowledged reading is stored', async ({ annotate }) => {
    const svc = await startChildService()
    children.push(svc)
    const token = await svc.adminToken()
    const { tote, dispatchedAt } = await dispatchedColdChain(svc, token, 'refrigerated')
    const readings = Array.from({ length: READINGS }, (_, i) => ({ ts: dispatchedAt + (i + 1) * STEP_MS, temp_c: 4 + (i % 30) / 10 }))
    const units = toUnits(readings, 7)
    const acked: boolean[] = []
    const ackedReadings = () => units.reduce((n, u, k) => n + (acked[k] ? u.count : 0), 0)

    const client = await connectTote(svc, tote)
    let stopSentAt = 0
    let ackedAtStop = 0
    const exit = new Promise<{ code: number | null; signal: string | null; ms: number }>((resolve) => {
      void svc.exited.then((e) => resolve({ ...e, ms: Date.now() - stopSentAt }))
    })
    await publishUnits(client, readingsTopicOf(tote.id), units, {
      from: 0,
      window: 32,
      acked,
      onAck: () => {
        if (stopSentAt === 0 && ackedReadings() >= SIGTERM_AFTER) {
          ackedAtStop = ackedReadings()
          stopSentAt = Date.now()
          process.kill(svc.pid, 'SIGTERM') // and keep publishing: the tote does not know
        }
      },
    })
    await closed(client)
    client.end(true)

    const { code, signal, ms } = await exit
    expect({ code, signal }).toEqual({ code: 0, signal: null })
    expect(ms).toBeLessThan(STOP_DEADLINE_MS)
    expect(ackedReadings(), 'the stream was still running when the stop came').toBeLessThan(READINGS)

    const stored = storedTimestamps(svc.dataDir, tote.id)
    const lost = units.flatMap((u, k) => (acked[k] ? readings.slice(u.first, u.first + u.count) : [])).filter((r) => !stored.has(r.ts))
    expect(lost).toEqual([])
    await annotate(
      `exited 0 in ${ms} ms; ${ackedAtStop} readings acknowledged at SIGTERM, ${ackedReadings()} in all (${ackedReadings() - ackedAtStop} acknowledged while stopping); ${stored.size} stored`,
    )
  }, 60_000)
})
