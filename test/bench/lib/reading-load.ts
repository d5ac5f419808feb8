import { seededRandom } from '../../../simulators/prng.js'
import type { ReadingRow } from '../../../src/timeseries/sink.js'

/**
 * A realistic mix of stored readings, generated straight into a sink's `write()` (no MQTT), in
 * time order and in batches as the group committer makes them: `slowTotes` report once a minute
 * and `fastTotes` once a second; two totes in three are bound to a delivery of `deliveryHours`
 * with an unbound hour between deliveries, the third never is. Values look like the tote
 * simulator's (simulators/scenarios.ts): temperature in hundredths of a degree (a random walk in
 * 2–8 °C), battery in thousandths draining slowly, humidity in tenths on half the totes, a
 * position (6 decimals) on one tote in ten, `seq` counting, the sensor's clock a few ms off the
 * second, and received 80–600 ms after `ts`. Deterministic (one seeded PRNG).
 */
export type ReadingLoad = {
  slowTotes: number
  fastTotes: number
  startMs: number
  hours: number
  deliveryHours?: number
  /** Rows per write(); the group committer's batches hold a few ms of readings. */
  batchRows?: number
  /** Prefix of the generated ids, so two loads into one store do not collide. */
  idPrefix?: string
}

type Tote = {
  id: string
  periodMs: number
  phaseMs: number
  temp: number
  battery: number
  humidity: number | null
  gps: [number, number] | null
  seq: number
  bound: boolean
}

export function* readingBatches(load: ReadingLoad): Generator<ReadingRow[]> {
  const { slowTotes, fastTotes, startMs, hours, deliveryHours = 4, batchRows = 2_000, idPrefix = '01jd' } = load
  const random = seededRandom(0x5eed)
  const id = (kind: string, n: number) => `${kind}_${idPrefix}${String(n).padStart(26 - idPrefix.length, '0')}`
  const totes: Tote[] = Array.from({ length: slowTotes + fastTotes }, (_, i) => ({
    id: id('tt', i),
    periodMs: i < slowTotes ? 60_000 : 1_000,
    phaseMs: Math.floor(random() * 60_000),
    temp: 200 + Math.floor(random() * 600),
    battery: 1_000 - Math.floor(random() * 200),
    humidity: i % 2 === 0 ? 400 + Math.floor(random() * 200) : null,
    gps: i % 10 === 0 ? [40_000_000 + Math.floor(random() * 1_000_000), -74_000_000 + Math.floor(random() * 1_000_000)] : null,
    seq: 0,
    bound: i % 3 !== 0,
  }))
  const cycleMs = (deliveryHours + 1) * 3_600_000
  const endMs = startMs + hours * 3_600_000
  let batch: ReadingRow[] = []
  // One second of event time at a time: every tote due in it reports.
  for (let second = startMs; second < endMs; second += 1_000) {
    for (let t = 0; t < totes.length; t++) {
      const tote = totes[t]!
      if (tote.periodMs === 60_000 && Math.floor((second - startMs + tote.phaseMs) / 1_000) % 60 !== 0) continue
      const ts = second + Math.floor(random() * 30) // the sensor's clock: a few ms off the second
      tote.temp = Math.min(800, Math.max(200, tote.temp + Math.round((random() - 0.5) * 6)))
      if (random() < 0.01) tote.battery = Math.max(0, tote.battery - 1)
      if (tote.humidity !== null && random() < 0.2) tote.humidity += random() < 0.5 ? -1 : 1
      if (tote.gps !== null) tote.gps = [tote.gps[0] + Math.round((random() - 0.5) * 200), tote.gps[1] + Math.round((random() - 0.5) * 200)]
      const cycle = Math.floor((ts - startMs + t * 600_000) / cycleMs)
      const inDelivery = tote.bound && (ts - startMs + t * 600_000) % cycleMs < deliveryHours * 3_600_000
      const delivery = inDelivery ? t * 10_000 + cycle : null
      batch.push({
        tote_id: tote.id,
        delivery_id: delivery === null ? null : id('dl', delivery),
        rx_id: delivery === null ? null : id('rx', delivery),
        ts,
        temp_c: tote.temp / 100,
        battery: tote.battery / 1_000,
        humidity: tote.humidity === null ? null : tote.humidity / 10,
        lat: tote.gps === null ? null : tote.gps[0] / 1e6,
        lng: tote.gps === null ? null : tote.gps[1] / 1e6,
        seq: ++tote.seq,
        received_at: ts + 80 + Math.floor(random() * 520),
        late: false,
      })
      if (batch.length >= batchRows) {
        yield batch
        batch = []
      }
    }
  }
  if (batch.length > 0) yield batch
}
