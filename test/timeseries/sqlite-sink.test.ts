import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import { createReadingSink } from '../../src/timeseries/index.js'
import { createSqliteSink } from '../../src/timeseries/sqlite-sink.js'
import { describeReadingSinkContract, reading } from './sink-contract.js'

describeReadingSinkContract('SQLite', async () => createSqliteSink({ path: ':memory:' }))

/** Every day already ended: each write is packed into chunks at once, so the contract runs on chunks. */
const LATER = Date.UTC(2100, 0, 1)
describeReadingSinkContract(
  'SQLite, every write compacted',
  async () => {
    const sink = createSqliteSink({ path: ':memory:', compaction: false })
    return {
      ...sink,
      async write(rows) {
        await sink.write(rows)
        while ((await sink.compact({ nowMs: LATER })).more);
      },
    }
  },
  { batches: 'chunked' },
)

describe('SQLite sink on disk', () => {
  const dir = mkdtempSync(join(tmpdir(), 'rxtrace-readings-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('keeps acknowledged rows across a restart, in DATA_DIR/readings.db', async () => {
    const dataDir = join(dir, 'data')
    const first = await createReadingSink({ dataDir })
    await first.write([reading({ ts: Date.UTC(2025, 0, 1) }), reading({ ts: Date.UTC(2025, 0, 1), tote_id: 'tt_other' })])
    await first.close()

    const again = await createReadingSink({ dataDir })
    expect(await again.count()).toBe(2)
    expect(await again.readingsForTote('tt_other', 0, Infinity)).toHaveLength(1)
    await again.close()
  })

  it('leaves nothing behind when a write fails part-way, and keeps working', async () => {
    const sink = createSqliteSink({ path: ':memory:' })
    const good = reading({ ts: Date.UTC(2025, 0, 1), tote_id: 'tt_new' })
    const bad = { ...reading({ ts: Date.UTC(2025, 0, 1) + 1 }), temp_c: null } as unknown as typeof good
    await expect(sink.write([good, bad])).rejects.toThrow(/NOT NULL/)
    expect(await sink.count()).toBe(0)
    await sink.write([good])
    expect(await sink.readingsForTote('tt_new', 0, Infinity)).toEqual([good])
    await sink.close()
  })
})
