import { Sender } from '@questdb/nodejs-client'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { createExec, httpOptionsOf } from '../../src/timeseries/questdb-exec.js'
import { createQuestdbSink } from '../../src/timeseries/questdb-sink.js'
import type { ReadingSink } from '../../src/timeseries/sink.js'
import { FakeQuestdb } from '../helpers/fake-questdb.js'
import { describeReadingSinkContract, expireAll, reading } from './sink-contract.js'

// ---- Against a real QuestDB, when one is configured -------------------------------------------

const QUESTDB_CONFIG = process.env.QUESTDB_CONFIG
if (QUESTDB_CONFIG === undefined) {
  console.warn('QuestDB contract tests skipped: set QUESTDB_CONFIG (e.g. http::addr=localhost:9000;) to run them')
}

describe.skipIf(QUESTDB_CONFIG === undefined)('QuestDB (QUESTDB_CONFIG)', () => {
  const config = QUESTDB_CONFIG ?? ''
  const tables: string[] = []
  afterAll(async () => {
    const exec = createExec(httpOptionsOf(config))
    for (const table of tables) await exec(`DROP TABLE IF EXISTS ${table}`)
  })
  describeReadingSinkContract(
    'QuestDB',
    async () => {
      const table = `readings_test_${process.pid}_${Date.now()}_${tables.length}`
      tables.push(table)
      return createQuestdbSink({ config, table })
    },
    { expiry: 'days' },
  )
})

// ---- Keep-until-acknowledged, against a stand-in for QuestDB's HTTP endpoints -----------------

/** The `seq` of each stored line, to see exactly which readings arrived. */
const seqs = (lines: string[]) => lines.map((l) => Number(/seq=(\d+)i/.exec(l)?.[1])).sort((a, b) => a - b)
const batch = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) => reading({ ts: Date.UTC(2025, 0, 1) + (from + i) * 1000, seq: from + i }))

describe('QuestDB sink keeps rows until QuestDB acknowledges them', () => {
  let fake: FakeQuestdb
  let addr: string
  let sink: ReadingSink | undefined
  // stdlib transport with retry_timeout=0: the client tries once, so every retry seen here is ours.
  const config = () => `http::addr=${addr};protocol_version=1;stdlib_http=on;retry_timeout=0;`

  beforeAll(async () => {
    fake = new FakeQuestdb()
    addr = await fake.start()
  })
  afterEach(async () => {
    await sink?.close()
    sink = undefined
    Object.assign(fake, {
      failNext: 0,
      failStatus: 500,
      failUntil: 0,
      writeRequests: 0,
      stored: [],
      applyLagMs: 0,
      sequencerTxn: 0,
      writerTxn: 0,
      appliedLines: 0,
      answerDelayMs: 0,
      maxWritesInFlight: 0,
      rows: new Map(),
    })
  })
  afterAll(() => new Promise((resolve) => fake.server.close(resolve)))

  it('shows the premise: the client alone drops the rows of a failed flush', async () => {
    const sender = await Sender.fromConfig(config(), { log: () => {} })
    fake.failNext = 1
    await sender
      .table('readings')
      .symbol('tote_id', 'tt_1')
      .intColumn('seq', 1)
      .at(Date.UTC(2025, 0, 1), 'ms')
    await expect(sender.flush()).rejects.toThrow(/statusCode=500/)
    expect(await sender.flush()).toBe(false) // nothing left to send: the row is gone
    expect(fake.stored).toEqual([])
    await sender.close()
  })

  it('re-sends a failed batch until it is stored, and only then resolves', async () => {
    const retries: number[] = []
    sink = await createQuestdbSink({
      config: config(),
      retry: { firstDelayMs: 5, maxDelayMs: 20 },
      onRetry: (attempt) => retries.push(attempt),
    })
    fake.failNext = 3
    await sink.write(batch(0, 50))
    expect(fake.writeRequests).toBe(4)
    expect(retries).toEqual([1, 2, 3])
    expect(seqs(fake.stored)).toEqual(batch(0, 50).map((r) => r.seq))
  })

  it('rejects once the retry deadline has passed, and the next write still goes through', async () => {
    sink = await createQuestdbSink({ config: config(), retry: { deadlineMs: 500, firstDelayMs: 20, maxDelayMs: 50 } })
    fake.failUntil = Date.now() + 60_000 // failing far longer than the test runs: only the deadline ends the retries
    await expect(sink.write(batch(0, 5))).rejects.toThrow(/did not store 5 readings after \d+ attempt/)
    expect(fake.writeRequests).toBeGreaterThan(2)
    expect(fake.stored).toEqual([])

    fake.failUntil = 0
    await sink.write(batch(5, 5))
    // An attempt cut off by the deadline may still reach QuestDB afterwards; rejected means
    // "not acknowledged" (the tote re-sends; the table dedups), not "not stored".
    expect(seqs(fake.stored)).toEqual(expect.arrayContaining([5, 6, 7, 8, 9]))
  })

  it('does not retry an answer that would fail the same way again', async () => {
    sink = await createQuestdbSink({ config: config(), retry: { firstDelayMs: 5 } })
    fake.failNext = 1
    fake.failStatus = 400
    await expect(sink.write(batch(0, 1))).rejects.toThrow(/statusCode=400/)
    expect(fake.writeRequests).toBe(1)
  })

  it('keeps concurrent writes apart while some are being retried', async () => {
    sink = await createQuestdbSink({ config: config(), retry: { firstDelayMs: 5, maxDelayMs: 10 } })
    fake.failNext = 2
    await Promise.all([sink.write(batch(0, 3)), sink.write(batch(3, 3)), sink.write(batch(6, 3))])
    // Each stored once and whole, in whatever order QuestDB took the requests (GroupCommitter
    // acknowledges them in the order it made them).
    expect(seqs(fake.stored)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8])
  })

  it('keeps several requests in flight, so QuestDB’s commit latency does not cap the rate', async () => {
    fake.answerDelayMs = 1_000 // long enough for all four requests to arrive on a loaded machine
    sink = await createQuestdbSink({ config: config(), concurrentWrites: 4 })
    expect(sink.concurrentWrites).toBe(4)
    await Promise.all(Array.from({ length: 8 }, (_, i) => sink!.write(batch(i * 10, 10))))
    expect(fake.maxWritesInFlight).toBe(4)
    expect(seqs(fake.stored)).toEqual(batch(0, 80).map((r) => r.seq))
  })

  it('also holds when the config string names the default (undici) transport and its own retries', async () => {
    sink = await createQuestdbSink({
      config: `http::addr=${addr};protocol_version=1;retry_timeout=100;`,
      retry: { firstDelayMs: 20, maxDelayMs: 50 },
    })
    fake.failUntil = Date.now() + 400
    await sink.write(batch(0, 20))
    expect(seqs(fake.stored)).toEqual(batch(0, 20).map((r) => r.seq))
  })

  it('reads only once QuestDB has applied the writes acknowledged before them', async () => {
    fake.applyLagMs = 1_000 // the acknowledgement must be seen before this lag runs out
    sink = await createQuestdbSink({ config: config() })
    await sink.write(batch(0, 3))
    expect(fake.appliedLines).toBe(0) // acknowledged, not yet applied
    expect(await sink.count()).toBe(3)
    await sink.write(batch(3, 2))
    expect(await sink.count()).toBe(5)
  })

  it('refuses a TCP config, whose writes are never acknowledged', async () => {
    await expect(createQuestdbSink({ config: 'tcp::addr=localhost:9009;' })).rejects.toThrow(/http:: or https::/)
  })

  it('expires whole days with nothing to keep (QuestDB has no row delete), one day per call', async () => {
    sink = await createQuestdbSink({ config: config() })
    const DAY = 86_400_000
    const day = (n: number) => Date.UTC(2019, 0, 1) + n * DAY
    const now = Date.UTC(2026, 0, 20)
    await sink.write([
      reading({ ts: day(0) + 1_000, delivery_id: null, rx_id: null, seq: 1 }),
      reading({ ts: day(1) + 1_000, delivery_id: 'dl_gone', seq: 2 }),
      reading({ ts: day(2) + 1_000, delivery_id: 'dl_kept', seq: 3 }),
      reading({ ts: day(2) + 2_000, delivery_id: null, rx_id: null, seq: 4 }),
      reading({ ts: now - 8 * DAY, delivery_id: null, rx_id: null, seq: 5 }), // unbound and past 7 days: lives as long as its day
    ])
    const request = { unboundBeforeMs: now - 7 * DAY, boundBeforeMs: now - 14 * DAY, keepDeliveries: new Set(['dl_kept']), limit: 1_000 }
    expect(await sink.expire!(request)).toEqual({ removed: 1, more: true })
    expect(await sink.expire!(request)).toEqual({ removed: 1, more: false })
    expect(await sink.expire!(request)).toEqual({ removed: 0, more: false })
    expect(seqs([...fake.rows.values()])).toEqual([3, 4, 5])
    // The kept delivery ended long ago: its day goes, and the days up to the cutoffs with it.
    const results = await expireAll(sink, { ...request, keepDeliveries: new Set() })
    expect(results.reduce((n, r) => n + r.removed, 0)).toBe(2)
    expect(seqs([...fake.rows.values()])).toEqual([5])
  })
})
