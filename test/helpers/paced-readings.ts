import type { MqttClient } from 'mqtt'
import type { testClock } from './clock.js'

// Well below the refrigerated profile's 15-minute max_gap_s.
const STEP_MS = 10 * 60_000

/**
 * Publishes a tote's readings (in ts order) at QoS 1, in steps of at most 10 minutes of their
 * time, the clock moved to each step's last reading before it is sent. The service's
 * once-a-second silence check then never sees a silence the readings do not have, whenever it
 * runs; a test that moved the clock past them all first would race it.
 */
export async function publishPaced(
  client: MqttClient,
  toteId: string,
  readings: readonly { ts: number; temp_c: number }[],
  clock: ReturnType<typeof testClock>,
): Promise<void> {
  for (let i = 0; i < readings.length;) {
    let end = i + 1
    while (end < readings.length && readings[end]!.ts - readings[i]!.ts < STEP_MS) end++
    const step = readings.slice(i, end)
    clock.set(Math.max(clock.now(), step.at(-1)!.ts))
    await client.publishAsync(`rxtrace/v1/totes/${toteId}/readings`, JSON.stringify(step), { qos: 1 })
    i = end
  }
}
