import { afterEach, describe, expect, it } from 'vitest'
import { startChildService, type ChildService } from '../helpers/child-service.js'
import { waitFor } from '../helpers/wait.js'
import { connectTote, dispatchedColdChain, readingsTopicOf } from './fixtures.js'

/**
 * A break is never retracted (SPEC §5), including one that only wall-clock silence revealed:
 * the tote goes quiet, the monitor breaks the chain for `sensor_gap`, then the tote's gateway
 * uploads the readings it had buffered, all in range. The live state stays broken; a restart,
 * which rebuilds the state from the stored readings (now without a gap), must keep it broken too.
 */

// 1 s of silence is a sensor gap, and 2 s of unknown time out of range breaks the chain.
const PROFILE = {
  name: 'quick-gap',
  min_c: 2,
  max_c: 8,
  grace_s: 0,
  max_excursion_s: 2,
  max_cumulative_s: 3_600,
  hard_min_c: null,
  hard_max_c: null,
  mkt_max_c: null,
  max_gap_s: 1,
}
const STEP_MS = 200

type ColdChain = { state: string; break_reason: string | null; broken_at: string | null; max_c: number | null }

const children: ChildService[] = []
afterEach(async () => {
  for (const child of children.splice(0)) await child.dispose()
})

describe('a cold-chain break raised by sensor silence', () => {
  it('still stands after a restart once a late upload has filled the gap with in-range readings', async () => {
    let svc = await startChildService({ env: { REORDER_WINDOW_S: '0' } })
    children.push(svc)
    let token = await svc.adminToken()
    const { tote, deliveryId, dispatchedAt } = await dispatchedColdChain(svc, token, PROFILE)
    const coldChain = async () => {
      const res = await svc.get<{ cold_chain: ColdChain | null }>(`/v1/deliveries/${deliveryId}`, token)
      expect(res.status, res.text).toBe(200)
      return res.body.cold_chain
    }

    // The tote says nothing: the monitor's wall-clock check breaks the chain.
    await waitFor(async () => (await coldChain())?.state === 'BROKEN', 15_000, 'the sensor_gap break')
    const announced = (await coldChain())!
    expect(announced.break_reason).toBe('sensor_gap')

    // The gateway uploads what it buffered: 5 °C every 200 ms since dispatch, no gap left.
    const upload = Array.from({ length: Math.floor((Date.now() - dispatchedAt) / STEP_MS) }, (_, i) => ({
      ts: dispatchedAt + (i + 1) * STEP_MS,
      temp_c: 5,
    }))
    let client = await connectTote(svc, tote)
    await client.publishAsync(readingsTopicOf(tote.id), JSON.stringify(upload), { qos: 1 })
    await client.endAsync()
    expect(await coldChain()).toMatchObject({ state: 'BROKEN', break_reason: 'sensor_gap', broken_at: announced.broken_at })

    expect(await svc.kill('SIGTERM')).toEqual({ code: 0, signal: null })
    svc = await svc.restart()
    children.push(svc)
    token = await svc.adminToken()

    // The tote reports again, every 200 ms, so there is no new silence, and at 6 °C: a summary
    // with max_c 6 was saved after the restart, from the state the restart rebuilt.
    client = await connectTote(svc, tote)
    let ts = upload.at(-1)!.ts
    const publishNext = () =>
      client.publishAsync(readingsTopicOf(tote.id), JSON.stringify({ ts: (ts = Math.max(ts + STEP_MS, Date.now())), temp_c: 6 }), {
        qos: 1,
      })
    const live = setInterval(() => void publishNext().catch(() => undefined), STEP_MS)
    try {
      await waitFor(async () => (await coldChain())?.max_c === 6, 15_000, 'a summary saved after the restart')
    } finally {
      clearInterval(live)
      await client.endAsync()
    }
    expect(await coldChain()).toMatchObject({ state: 'BROKEN', break_reason: 'sensor_gap', broken_at: announced.broken_at })

    const events = await svc.get<{ data: { type: string }[] }>(`/v1/events?delivery_id=${deliveryId}&limit=100`, token)
    expect(events.body.data.filter((e) => e.type === 'cold-chain.break')).toHaveLength(1)
  }, 60_000)
})
