/**
 * A child process for readings-maintenance-crash.test.ts: opens a readings file and runs
 * compaction or expiry passes back to back, printing "pass N" after each, until nothing is
 * left (then "done"). The test SIGKILLs it in the middle.
 */
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'

const [mode, path, keep] = process.argv.slice(2) as ['compact' | 'expire', string, string]
const sink = createSqliteSink({ path, compaction: false })
const LATER = Date.UTC(2100, 0, 1)
for (let n = 1; ; n++) {
  const more =
    mode === 'compact'
      ? (await sink.compact({ nowMs: LATER, maxReadings: 300 })).more
      : (
          await sink.expire!({
            unboundBeforeMs: LATER,
            boundBeforeMs: LATER,
            keepDeliveries: new Set(keep.split(',')),
            limit: 300,
          })
        ).more
  process.stdout.write(`pass ${n}\n`)
  if (!more) break
}
await sink.close()
process.stdout.write('done\n')
