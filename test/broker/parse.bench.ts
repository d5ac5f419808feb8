// `npx vitest bench test/broker/parse.bench.ts`: cost of parsing one 100-reading gateway batch.
import { bench, describe } from 'vitest'
import { parseReadings } from '../../src/telemetry/parse.js'

const now = Date.now()
const batch = Array.from({ length: 100 }, (_, i) => ({
  ts: now - 100_000 + i * 1000,
  temp_c: 4 + (i % 10) / 10,
  seq: i,
  battery: 0.8,
  humidity: 55,
  lat: 40.1,
  lng: -73.9,
}))
const payloads = {
  'epoch ms': Buffer.from(JSON.stringify(batch)),
  'RFC 3339': Buffer.from(JSON.stringify(batch.map((r) => ({ ...r, ts: new Date(r.ts).toISOString() })))),
  'SenML (temp + battery)': Buffer.from(
    JSON.stringify([
      { bn: 'urn:dev:tote:tt_1:', bt: Math.floor(now / 1000) - 200, bu: 'Cel' },
      ...batch.flatMap((r, i) => [
        { n: 'temp', t: i, v: r.temp_c },
        { n: 'battery', u: '/', t: i, v: r.battery },
      ]),
    ]),
  ),
}

describe('parseReadings, 100-reading batch', () => {
  for (const [name, payload] of Object.entries(payloads)) {
    bench(name, () => {
      const r = parseReadings(payload, now)
      if (!r.ok) throw new Error(r.reason)
    })
  }
  bench('JSON.parse alone (floor)', () => {
    JSON.parse(payloads['epoch ms'].toString('utf8'))
  })
})
