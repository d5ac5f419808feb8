import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ExpiryRequest, ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { readingRow } from '../helpers/reading-row.js'

/**
 * The behaviour every ReadingSink adapter must show. Reads go through `visible()` first, which
 * waits for the rows and then checks their exact count: the QuestDB adapter makes each read wait
 * until the writes acknowledged before it are applied to the table, and this keeps the contract
 * honest if that wait ever falls short; SQLite passes at once.
 */

const T0 = Date.UTC(2025, 5, 1, 8, 0, 0)
const MIN = 60_000

export function reading(over: Partial<ReadingRow> & Pick<ReadingRow, 'ts'>): ReadingRow {
  return readingRow({
    tote_id: 'tt_contract_a',
    delivery_id: 'dl_contract_1',
    rx_id: 'rx_contract_1',
    received_at: over.ts + 1_000,
    ...over,
  })
}

/** Waits until `n` rows are readable, then checks there are exactly `n`. */
async function visible(sink: ReadingSink, n: number): Promise<void> {
  await vi.waitFor(async () => expect(await sink.count()).toBeGreaterThanOrEqual(n), { timeout: 15_000, interval: 50 })
  expect(await sink.count()).toBe(n)
}

const DAY = 86_400_000

/** Calls `expire` until it says nothing is left; resolves with every call's result. */
export async function expireAll(sink: ReadingSink, request: ExpiryRequest) {
  const results: { removed: number; more: boolean }[] = []
  for (let more = true; more;) {
    const result = await sink.expire!(request)
    results.push(result)
    more = result.more
    if (results.length > 100) throw new Error('expire never reported the end')
  }
  return results
}

const tsOf = async (sink: ReadingSink, toteId: string) =>
  (await sink.readingsForTote(toteId, 0, Number.MAX_SAFE_INTEGER)).map((r) => [r.ts, r.delivery_id])

/**
 * `expiry`: how the adapter's `expire` removes readings. `rows` (SQLite, PostgreSQL): exactly the
 * readings past retention. `days` (QuestDB, no row delete): whole days with nothing to keep, so
 * unbound readings live as long as their day (docs/operations.md, Retention). `batches`:
 * `exact`, a batch removes at most `limit` readings; `chunked` (SQLite's packed days), a packed
 * chunk goes whole, so a batch may pass the limit by less than one chunk.
 */
export function describeReadingSinkContract(
  adapter: string,
  createSink: () => Promise<ReadingSink>,
  { expiry = 'rows', batches = 'exact' }: { expiry?: 'rows' | 'days'; batches?: 'exact' | 'chunked' } = {},
): void {
  describe(`ReadingSink contract: ${adapter}`, () => {
    let sink: ReadingSink
    beforeEach(async () => {
      sink = await createSink()
    })
    afterEach(async () => {
      await sink.close()
    })

    it('gives back every field as written, in ts order, whatever order the writes came in', async () => {
      const full = reading({
        ts: T0 + 2 * MIN,
        temp_c: -18.25,
        battery: 0.5,
        humidity: 41.5,
        lat: 52.520008333333335, // every digit of a double comes back
        lng: 0.1 + 0.2,
        seq: 42,
        received_at: T0 + 90 * MIN,
        late: true,
      })
      const bare = reading({ ts: T0 + MIN })
      await sink.write([full])
      await sink.write([bare])
      await visible(sink, 2)
      expect(await sink.readingsForDelivery('dl_contract_1', T0, T0 + 10 * MIN)).toEqual([bare, full])
    })

    it('keeps one row per (tote_id, ts) however often it is written', async () => {
      const r = reading({ ts: T0, temp_c: 4 })
      await sink.write([r, r])
      await sink.write([r, reading({ ts: T0, tote_id: 'tt_contract_b' })])
      await visible(sink, 2)
      expect(await sink.readingsForTote('tt_contract_a', T0, T0 + 1)).toHaveLength(1)
    })

    it('reads a delivery within [from, to) and nothing of other deliveries', async () => {
      await sink.write([
        reading({ ts: T0 - 1 }),
        reading({ ts: T0 }),
        reading({ ts: T0 + MIN }),
        reading({ ts: T0 + 2 * MIN }),
        reading({ ts: T0 + MIN + 1, tote_id: 'tt_contract_b', delivery_id: 'dl_contract_2', rx_id: 'rx_contract_2' }),
      ])
      await visible(sink, 5)
      const rows = await sink.readingsForDelivery('dl_contract_1', T0, T0 + 2 * MIN)
      expect(rows.map((r) => r.ts)).toEqual([T0, T0 + MIN])
      expect(await sink.readingsForDelivery('dl_nobody', 0, Number.MAX_SAFE_INTEGER)).toEqual([])
      // The newest of the range only: a custody event's handoff temperature.
      expect((await sink.latestForDelivery('dl_contract_1', T0, T0 + 2 * MIN))?.ts).toBe(T0 + MIN)
      expect((await sink.latestForDelivery('dl_contract_1', T0, T0 + MIN + 1))?.ts).toBe(T0 + MIN)
      expect(await sink.latestForDelivery('dl_contract_1', T0 + 3 * MIN, T0 + 4 * MIN)).toBeNull()
      expect(await sink.latestForDelivery('dl_nobody', 0, Number.MAX_SAFE_INTEGER)).toBeNull()
    })

    it('attributes rows stored before their binding was known, and takes back rows outside it', async () => {
      const unbound = { delivery_id: null, rx_id: null }
      await sink.write([
        reading({ ts: T0 - MIN, ...unbound }), // before the dispatch's occurred_at: stays unattributed
        reading({ ts: T0, ...unbound }), // stored before the backdated dispatch was recorded
        reading({ ts: T0 + MIN, ...unbound }),
        reading({ ts: T0 + 2 * MIN, delivery_id: 'dl_contract_9', rx_id: 'rx_contract_9' }), // another delivery's: untouched
        reading({ ts: T0 + MIN, tote_id: 'tt_contract_b', ...unbound }), // another tote's: untouched
      ])
      await visible(sink, 5)
      const binding = { deliveryId: 'dl_contract_1', rxId: 'rx_contract_1', fromMs: T0, toMs: null }
      await sink.attribute('tt_contract_a', binding)
      const ofDelivery = async () =>
        (await sink.readingsForDelivery('dl_contract_1', 0, Number.MAX_SAFE_INTEGER)).map((r) => [r.ts, r.rx_id])
      await vi.waitFor(
        async () =>
          expect(await ofDelivery()).toEqual([
            [T0, 'rx_contract_1'],
            [T0 + MIN, 'rx_contract_1'],
          ]),
        { timeout: 15_000, interval: 50 },
      )
      expect(await sink.bucketed('dl_contract_1', T0, T0 + 10 * MIN, MIN)).toEqual([
        { t: T0, min: 5, max: 5, avg: 5, n: 1 },
        { t: T0 + MIN, min: 5, max: 5, avg: 5, n: 1 },
      ])

      // The delivery ended, recorded later with an occurred_at before the second reading.
      await sink.attribute('tt_contract_a', { ...binding, toMs: T0 + MIN })
      await vi.waitFor(async () => expect(await ofDelivery()).toEqual([[T0, 'rx_contract_1']]), { timeout: 15_000, interval: 50 })
      const tote = await sink.readingsForTote('tt_contract_a', 0, Number.MAX_SAFE_INTEGER)
      expect(tote.map((r) => [r.ts, r.delivery_id])).toEqual([
        [T0 - MIN, null],
        [T0, 'dl_contract_1'],
        [T0 + MIN, null],
        [T0 + 2 * MIN, 'dl_contract_9'],
      ])
      expect((await sink.readingsForTote('tt_contract_b', 0, Number.MAX_SAFE_INTEGER))[0]!.delivery_id).toBeNull()
      expect(await sink.count()).toBe(5)
    })

    it('reads a tote across deliveries and while unbound, for rebuilding rule state', async () => {
      await sink.write([
        reading({ ts: T0, delivery_id: null, rx_id: null }),
        reading({ ts: T0 + MIN, delivery_id: 'dl_contract_1' }),
        reading({ ts: T0 + 2 * MIN, delivery_id: 'dl_contract_2', rx_id: 'rx_contract_2' }),
        reading({ ts: T0 + MIN, tote_id: 'tt_contract_b' }),
      ])
      await visible(sink, 4)
      const rows = await sink.readingsForTote('tt_contract_a', T0, T0 + 3 * MIN)
      expect(rows.map((r) => [r.ts, r.delivery_id, r.rx_id])).toEqual([
        [T0, null, null],
        [T0 + MIN, 'dl_contract_1', 'rx_contract_1'],
        [T0 + 2 * MIN, 'dl_contract_2', 'rx_contract_2'],
      ])
    })

    it('aggregates a trace into epoch-aligned steps with min, max, avg and count', async () => {
      const start = T0 + 30_000 // mid-minute: buckets still start on the minute
      await sink.write([
        reading({ ts: start, temp_c: 2 }),
        reading({ ts: start + 10_000, temp_c: 4 }),
        reading({ ts: start + 40_000, temp_c: 9 }),
        reading({ ts: start + 3 * MIN, temp_c: 6 }),
      ])
      await visible(sink, 4)
      const trace = await sink.bucketed('dl_contract_1', start, start + 10 * MIN, MIN)
      expect(trace).toEqual([
        { t: T0, min: 2, max: 4, avg: 3, n: 2 },
        { t: T0 + MIN, min: 9, max: 9, avg: 9, n: 1 },
        { t: T0 + 3 * MIN, min: 6, max: 6, avg: 6, n: 1 },
      ])
      await expect(sink.bucketed('dl_contract_1', start, start + MIN, 0)).rejects.toThrow(RangeError)
    })

    it('stores a 10,000-row write as one batch', async () => {
      const rows = Array.from({ length: 10_000 }, (_, i) =>
        reading({ ts: T0 + i * 1000, tote_id: `tt_contract_${i % 10}`, seq: i, temp_c: 2 + (i % 60) / 10 }),
      )
      await sink.write(rows)
      await sink.write([])
      await visible(sink, 10_000)
      const one = await sink.readingsForTote('tt_contract_3', T0, T0 + 10_000_000)
      expect(one).toHaveLength(1_000)
      expect(one[0]).toEqual(rows[3])
    })

    // Retention (docs/operations.md). An adapter without `expire` keeps every reading: skipped.
    const NOW = Date.UTC(2026, 0, 20, 12) // cutoffs inside one month: no adapter can drop the month whole
    const policy = (over: Partial<ExpiryRequest> = {}): ExpiryRequest => ({
      unboundBeforeMs: NOW - 7 * DAY,
      boundBeforeMs: NOW - 14 * DAY,
      keepDeliveries: new Set(['dl_kept']),
      limit: 1_000,
      ...over,
    })

    it('expires unbound readings past their window and readings of deliveries past retention, nothing else', async (ctx) => {
      if (!sink.expire || expiry !== 'rows') return ctx.skip()
      const unbound = { delivery_id: null, rx_id: null }
      await sink.write([
        reading({ ts: NOW - 8 * DAY, ...unbound }), // unbound, past 7 days: goes
        reading({ ts: NOW - 6 * DAY, ...unbound }), // unbound, inside: stays
        reading({ ts: NOW - 15 * DAY, delivery_id: 'dl_old' }), // bound, past the records cutoff: goes
        reading({ ts: NOW - 10 * DAY, delivery_id: 'dl_old' }), // bound, older than the unbound window only: stays
        reading({ ts: NOW - 16 * DAY, delivery_id: 'dl_kept' }), // past the cutoff, but its delivery is kept (open, or ended inside retention)
        reading({ ts: NOW - 9 * DAY, tote_id: 'tt_contract_b', ...unbound }), // another tote's, past the window: goes
      ])
      await visible(sink, 6)
      const results = await expireAll(sink, policy())
      expect(results.reduce((n, r) => n + r.removed, 0)).toBe(3)
      await visible(sink, 3)
      expect(await tsOf(sink, 'tt_contract_a')).toEqual([
        [NOW - 16 * DAY, 'dl_kept'],
        [NOW - 10 * DAY, 'dl_old'],
        [NOW - 6 * DAY, null],
      ])
      expect(await tsOf(sink, 'tt_contract_b')).toEqual([])
      // A second pass finds nothing.
      expect(await expireAll(sink, policy())).toEqual([{ removed: 0, more: false }])
    })

    it('removes a backlog in batches of the limit, each saying whether more is left', async (ctx) => {
      if (!sink.expire || expiry !== 'rows') return ctx.skip()
      const old = Array.from({ length: 250 }, (_, i) => reading({ ts: NOW - 8 * DAY - i * 1_000, delivery_id: null, rx_id: null }))
      const kept = Array.from({ length: 5 }, (_, i) => reading({ ts: NOW - i * 1_000, delivery_id: null, rx_id: null }))
      await sink.write([...old, ...kept])
      await visible(sink, 255)
      const first = await sink.expire(policy({ limit: 100 }))
      if (batches === 'exact') expect(first).toEqual({ removed: 100, more: true })
      else expect(first).toMatchObject({ more: true })
      const rest = await expireAll(sink, policy({ limit: 100 }))
      if (batches === 'exact') expect(rest.every((r) => r.removed <= 100)).toBe(true)
      expect(first.removed + rest.reduce((n, r) => n + r.removed, 0)).toBe(250)
      await visible(sink, 5)
    })

    it('removes every expired reading of a pass in small batches, ties at a batch’s edge included, and starts the next pass afresh', async (ctx) => {
      if (!sink.expire || expiry !== 'rows') return ctx.skip()
      // Twelve totes' unbound readings at one ts, and three deliveries' readings at one ts each: a
      // limit of 5 ends batches in the middle of each tie.
      const tied = Date.UTC(2026, 0, 5)
      const totes = Array.from({ length: 12 }, (_, i) => `tt_tie_${String(i).padStart(2, '0')}`)
      await sink.write([
        ...totes.map((tote_id) => reading({ tote_id, ts: tied, delivery_id: null, rx_id: null })),
        ...totes.map((tote_id, i) => reading({ tote_id, ts: tied - DAY, delivery_id: `dl_tie_${i % 3}` })),
      ])
      await visible(sink, 24)
      const pass = await expireAll(sink, policy({ limit: 5 }))
      expect(pass.reduce((n, r) => n + r.removed, 0)).toBe(24)
      await visible(sink, 0)
      // Written after the pass, older than anything it removed: the next pass starts from the beginning.
      await sink.write([reading({ tote_id: totes[0], ts: tied - 2 * DAY, delivery_id: null, rx_id: null })])
      await visible(sink, 1)
      expect((await expireAll(sink, policy({ limit: 5 }))).reduce((n, r) => n + r.removed, 0)).toBe(1)
      await visible(sink, 0)
    })

    it('keeps readings that a backdated binding gave to a delivery, even when they were stored unbound', async (ctx) => {
      if (!sink.expire) return ctx.skip()
      const unbound = { delivery_id: null, rx_id: null }
      await sink.write([reading({ ts: NOW - 20 * DAY, ...unbound }), reading({ ts: NOW - 19 * DAY, ...unbound })])
      await visible(sink, 2)
      // A dispatch recorded late, with an occurred_at before both readings: they become the delivery's.
      await sink.attribute('tt_contract_a', { deliveryId: 'dl_backdated', rxId: 'rx_backdated', fromMs: NOW - 21 * DAY, toMs: null })
      await vi.waitFor(async () => expect(await sink.readingsForDelivery('dl_backdated', 0, NOW)).toHaveLength(2), { timeout: 15_000 })
      // Open: kept whatever the records cutoff.
      await expireAll(sink, policy({ boundBeforeMs: NOW, keepDeliveries: new Set(['dl_backdated']) }))
      // Not kept by name, but younger than the records cutoff: kept too (the unbound window is not theirs any more).
      await expireAll(sink, policy({ boundBeforeMs: NOW - 30 * DAY, keepDeliveries: new Set() }))
      await visible(sink, 2)
      expect(await tsOf(sink, 'tt_contract_a')).toEqual([
        [NOW - 20 * DAY, 'dl_backdated'],
        [NOW - 19 * DAY, 'dl_backdated'],
      ])
    })

    it('drops whole days with nothing to keep, and no day holding a kept delivery’s reading or a later one', async (ctx) => {
      if (!sink.expire || expiry !== 'days') return ctx.skip()
      const day = (n: number) => Date.UTC(2019, 0, 1) + n * DAY
      const unbound = { delivery_id: null, rx_id: null }
      await sink.write([
        reading({ ts: day(0) + 1_000, ...unbound }), // day 0: goes
        reading({ ts: day(1) + 1_000, delivery_id: 'dl_gone' }), // day 1: goes
        reading({ ts: day(2) + 1_000, delivery_id: 'dl_kept' }), // day 2: a kept delivery's, stays
        reading({ ts: day(2) + 2_000, ...unbound }), // same day: stays with it
        reading({ ts: day(3) + 1_000, ...unbound }), // after it: stays
        reading({ ts: NOW - 1_000, ...unbound }), // inside both windows
      ])
      await visible(sink, 6)
      const results = await expireAll(sink, policy({ keepDeliveries: new Set(['dl_kept']) }))
      expect(results.reduce((n, r) => n + r.removed, 0)).toBe(2)
      await visible(sink, 4)
      expect((await tsOf(sink, 'tt_contract_a')).map(([ts]) => ts)).toEqual([day(2) + 1_000, day(2) + 2_000, day(3) + 1_000, NOW - 1_000])
    })
  })
}
