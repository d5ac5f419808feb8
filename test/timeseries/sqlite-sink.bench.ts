// `npx vitest bench test/timeseries/sqlite-sink.bench.ts`: one op = one 10,000-row write()
// (1,000 totes × 10 readings, realistic 29-character ids) into a file-backed sink; rows/s = hz × 10,000.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { bench, describe } from 'vitest'
import type { ReadingRow } from '../../src/timeseries/sink.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'

const sink = createSqliteSink({ path: join(mkdtempSync(join(tmpdir(), 'rxtrace-bench-')), 'readings.db') })
const ids = (prefix: string) => Array.from({ length: 1000 }, (_, i) => `${prefix}_01jd${String(i).padStart(22, '0')}`)
const totes = ids('tt'),
  deliveries = ids('dl'),
  prescriptions = ids('rx')
const T0 = Date.UTC(2025, 0, 1)
let n = 0

function nextBatch(): ReadingRow[] {
  return Array.from({ length: 10_000 }, () => {
    const i = n++
    const k = i % 1000
    const ts = T0 + Math.floor(i / 1000) * 1000
    return {
      tote_id: totes[k]!,
      delivery_id: deliveries[k]!,
      rx_id: prescriptions[k]!,
      ts,
      temp_c: 4 + (i % 7) / 10,
      battery: 0.9,
      humidity: 50,
      lat: 40.7,
      lng: -74,
      seq: i,
      received_at: ts + 50,
      late: false,
    }
  })
}

// Built up front so the op measures only write(); every row is new (no dedup short-cuts).
const batches = Array.from({ length: 60 }, nextBatch)
let next = 0

describe('SQLite sink', () => {
  bench(
    'write() 10,000 new rows',
    async () => {
      await sink.write(batches[next++]!)
    },
    { iterations: 30, time: 0, warmupIterations: 5, warmupTime: 0 },
  )
})
