import { mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import fc from 'fast-check'
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest'
import type { ExpiryRequest, ReadingRow } from '../../src/timeseries/sink.js'
import { decodeChunk, encodeChunk, type ChunkReading } from '../../src/timeseries/sqlite-chunk.js'
import { createSqliteSink, type SqliteReadingSink } from '../../src/timeseries/sqlite-sink.js'
import { withTimeOrderedBindingIndex } from '../helpers/old-chunk-index.js'
import { readingRow } from '../helpers/reading-row.js'

const DAY = 86_400_000
const MIN = 60_000
const D0 = Date.UTC(2025, 0, 6)
/** Every day of these tests has ended by then. */
const LATER = Date.UTC(2100, 0, 1)

const dir = mkdtempSync(join(tmpdir(), 'rxtrace-compaction-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const open: SqliteReadingSink[] = []
afterEach(async () => {
  for (const s of open.splice(0)) await s.close()
})
let files = 0
function sink(path = join(dir, `readings-${files++}.db`)): SqliteReadingSink {
  const s = createSqliteSink({ path, compaction: false })
  open.push(s)
  return s
}
const compactAll = async (s: SqliteReadingSink) => {
  while ((await s.compact({ nowMs: LATER, maxReadings: 500 })).more);
}
const tables = (path: string) => {
  const db = new Database(path, { readonly: true })
  const names = db
    .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%day%' ORDER BY name")
    .all()
  db.close()
  return names.map((t) => t.name)
}

/** Two days of a tote once a minute: unbound, then delivery dl_1 for 6 h from D0 + 2 h, then unbound. */
function twoDays(tote = 'tt_a'): ReadingRow[] {
  return Array.from({ length: 2 * 1440 }, (_, i) => {
    const ts = D0 + i * MIN + (i % 7)
    const bound = ts >= D0 + 2 * 3_600_000 && ts < D0 + 8 * 3_600_000
    return readingRow({
      tote_id: tote,
      ts,
      delivery_id: bound ? `dl_1_${tote}` : null,
      rx_id: bound ? `rx_1_${tote}` : null,
      temp_c: 4 + Math.round(Math.sin(i / 50) * 300) / 100,
      battery: Math.round((1 - i / 10_000) * 1000) / 1000,
      humidity: i % 3 === 0 ? null : 45.5,
      seq: i,
      received_at: ts + 200 + (i % 11) * 37,
      late: i % 97 === 0,
    })
  })
}

describe('chunk encoding', () => {
  const value = fc.oneof(
    fc.constant(null),
    fc.double({ noNaN: true }),
    fc.integer({ min: -100_000, max: 100_000 }).map((n) => n / 100),
  )
  it('gives back every reading bit for bit, whatever the values', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            step: fc.integer({ min: 1, max: 10 * DAY }),
            lag: fc.integer({ min: -DAY, max: DAY }),
            temp_c: fc.oneof(
              fc.double({ noNaN: true, noDefaultInfinity: true }),
              fc.integer({ min: -5000, max: 5000 }).map((n) => n / 100),
            ),
            battery: value,
            humidity: value,
            lat: value,
            lng: value,
            seq: fc.oneof(fc.constant(null), fc.integer(), fc.constant(-0)),
            late: fc.boolean(),
          }),
          { minLength: 1, maxLength: 50 },
        ),
        (draws) => {
          let ts = D0
          const readings: ChunkReading[] = draws.map(({ step, lag, ...r }) => ({ ...r, ts: (ts += step), received_at: ts + lag }))
          const back = decodeChunk(readings[0]!.ts, readings.length, encodeChunk(readings))
          expect(back).toHaveLength(readings.length)
          back.forEach((r, i) => {
            for (const [k, v] of Object.entries(readings[i]!))
              expect(Object.is(r[k as keyof ChunkReading], v), `${k}: ${String(r[k as keyof ChunkReading])} vs ${String(v)}`).toBe(true)
          })
        },
      ),
    )
  })
})

describe('compaction of ended days', () => {
  it('packs a day into chunks that read back exactly as the rows did, in a fraction of the space', async () => {
    const path = join(dir, 'pack.db')
    const s = sink(path)
    const rows = [...twoDays('tt_a'), ...twoDays('tt_b')]
    await s.write(rows)
    const before = {
      tote: await s.readingsForTote('tt_a', 0, Infinity),
      delivery: await s.readingsForDelivery('dl_1_tt_b', D0, D0 + DAY),
      trace: await s.bucketed('dl_1_tt_a', D0, D0 + DAY, 15 * MIN),
      part: await s.readingsForTote('tt_b', D0 + DAY - 30 * MIN, D0 + DAY + 30 * MIN),
    }
    // A day ends an hour before it is compacted: at D0 + 1 day + 30 min, nothing is due yet.
    expect(await s.compact({ nowMs: D0 + DAY + 30 * MIN })).toEqual({ readings: 0, more: false })
    await compactAll(s)
    expect(tables(path)).toEqual(['chunks_day_20094', 'chunks_day_20095'])
    expect(await s.count()).toBe(rows.length)
    expect(await s.readingsForTote('tt_a', 0, Infinity)).toEqual(before.tote)
    expect(await s.readingsForDelivery('dl_1_tt_b', D0, D0 + DAY)).toEqual(before.delivery)
    expect(await s.bucketed('dl_1_tt_a', D0, D0 + DAY, 15 * MIN)).toEqual(before.trace)
    expect(await s.readingsForTote('tt_b', D0 + DAY - 30 * MIN, D0 + DAY + 30 * MIN)).toEqual(before.part)
    expect(before.tote).toHaveLength(2880)
  })

  it('compacts ended days in the background, without a call', async () => {
    const path = join(dir, 'background.db')
    const s = createSqliteSink({ path, now: () => LATER, compactEveryMs: 20 })
    open.push(s)
    await s.write(twoDays())
    await vi.waitFor(() => expect(tables(path)).toEqual(['chunks_day_20094', 'chunks_day_20095']), { timeout: 20_000, interval: 50 })
    expect(await s.readingsForTote('tt_a', 0, Infinity)).toEqual(twoDays())
  })

  it('stores a late reading of a compacted day once, beside its chunks, and packs it on the next pass', async () => {
    const path = join(dir, 'late.db')
    const s = sink(path)
    const rows = twoDays()
    await s.write(rows)
    await compactAll(s)
    const late = readingRow({ tote_id: 'tt_a', ts: D0 + 90 * MIN + 30_000, temp_c: 9.5, late: true })
    await s.write([late, rows[5]!, rows[1500]!]) // one new reading, two retransmissions of chunked ones
    expect(await s.count()).toBe(rows.length + 1)
    const around = await s.readingsForTote('tt_a', D0 + 89 * MIN, D0 + 92 * MIN)
    expect(around.map((r) => r.ts)).toEqual([rows[89]!.ts, rows[90]!.ts, late.ts, rows[91]!.ts])
    await compactAll(s)
    expect(tables(path)).toEqual(['chunks_day_20094', 'chunks_day_20095'])
    expect(await s.readingsForTote('tt_a', D0 + 89 * MIN, D0 + 92 * MIN)).toEqual(around)
    expect(await s.count()).toBe(rows.length + 1)
  })

  it("gives a delivery's trace from chunks, late packs overlapping earlier ones, exactly as from the same readings kept as rows", async () => {
    const reading = (ts: number, tenths: number, late = false) =>
      readingRow({ tote_id: 'tt_a', ts, delivery_id: 'dl_1', rx_id: 'rx_1', temp_c: tenths / 10, late })
    await fc.assert(
      fc.asyncProperty(
        // Minutes of two days, many of them around midnight, where a step that does not divide a day has a bucket in both.
        fc.uniqueArray(fc.oneof(fc.integer({ min: 0, max: 2 * 1440 - 1 }), fc.integer({ min: 1440 - 30, max: 1440 + 30 })), {
          minLength: 1,
          maxLength: 300,
          size: 'large',
        }),
        fc.oneof(fc.constant([]), fc.uniqueArray(fc.integer({ min: 0, max: 2 * 1440 - 1 }), { minLength: 1, maxLength: 60 })),
        fc.record({ on: fc.boolean(), from: fc.nat(), to: fc.nat() }),
        fc.integer({ min: 0, max: 2 * DAY }),
        fc.integer({ min: 1, max: 2 * DAY }),
        fc.constantFrom(MIN, 7 * MIN, 11 * MIN, 60 * MIN, 5_000),
        async (onTime, lateMinutes, onReadings, from, span, step) => {
          const first = onTime.map((m) => reading(D0 + m * MIN, (m % 90) - 20))
          // Late readings fall between the on-time ones (30 s past a minute), packed in chunks of their own.
          const late = lateMinutes.map((m) => reading(D0 + m * MIN + 30_000, 80 - (m % 70), true))
          // Half the windows start and end on a reading, where a bound taken the wrong way shows.
          const at = (pick: number) => first[pick % first.length]!.ts
          const window = onReadings.on
            ? ([Math.min(at(onReadings.from), at(onReadings.to)), Math.max(at(onReadings.from), at(onReadings.to))] as const)
            : ([D0 + from, D0 + from + span] as const)
          const compacted = sink()
          const rowsOnly = sink()
          for (const s of [compacted, rowsOnly]) await s.write(first)
          await compactAll(compacted)
          for (const s of [compacted, rowsOnly]) if (late.length) await s.write(late)
          await compactAll(compacted)
          const fromChunks = await compacted.bucketed('dl_1', ...window, step)
          expect(fromChunks).toEqual(await rowsOnly.bucketed('dl_1', ...window, step))
          // Both stores split the window by day and join the days' buckets alike: the readings themselves say what each bucket holds.
          const expected = new Map<number, number[]>()
          for (const r of [...first, ...late].filter((r) => r.ts >= window[0] && r.ts < window[1]).sort((a, b) => a.ts - b.ts))
            expected.set(r.ts - (r.ts % step), [...(expected.get(r.ts - (r.ts % step)) ?? []), r.temp_c])
          expect(fromChunks.map(({ t, n, min, max }) => ({ t, n, min, max }))).toEqual(
            [...expected].map(([t, temps]) => ({ t, n: temps.length, min: Math.min(...temps), max: Math.max(...temps) })),
          )
          await Promise.all([compacted, rowsOnly].map((s) => s.close()))
          open.splice(0)
        },
      ),
      { numRuns: 25 },
    )
  })

  it('re-binds chunked readings when a binding changes backdated, and packs them again', async () => {
    const s = sink()
    await s.write(twoDays())
    await compactAll(s)
    // The dispatch of dl_2 is recorded late, from D0 + 10 h; it ended at D0 + 30 h.
    const binding = { deliveryId: 'dl_2', rxId: 'rx_2', fromMs: D0 + 10 * 3_600_000, toMs: D0 + 30 * 3_600_000 }
    expect(await s.attribute('tt_a', binding)).toBe(true)
    const ofDl2 = await s.readingsForDelivery('dl_2', 0, Number.MAX_SAFE_INTEGER)
    expect(ofDl2).toHaveLength(20 * 60)
    expect(ofDl2.every((r) => r.rx_id === 'rx_2')).toBe(true)
    // dl_1's end is moved back two hours: its last two hours are nobody's now.
    await s.attribute('tt_a', { deliveryId: 'dl_1_tt_a', rxId: 'rx_1_tt_a', fromMs: D0 + 2 * 3_600_000, toMs: D0 + 6 * 3_600_000 })
    await compactAll(s)
    expect(await s.readingsForDelivery('dl_2', 0, Number.MAX_SAFE_INTEGER)).toEqual(ofDl2)
    expect(await s.readingsForDelivery('dl_1_tt_a', 0, Number.MAX_SAFE_INTEGER)).toHaveLength(4 * 60)
    const tote = await s.readingsForTote('tt_a', D0 + 6 * 3_600_000, D0 + 8 * 3_600_000)
    expect(tote.every((r) => r.delivery_id === null)).toBe(true)
    expect(await s.count()).toBe(2880)
  })

  it('opens a readings file written before day partitions, its readings moved to their days', () => {
    const path = join(dir, 'legacy.db')
    const db = new Database(path)
    db.exec(`
      CREATE TABLE totes (tote_key INTEGER PRIMARY KEY, tote_id TEXT NOT NULL UNIQUE);
      CREATE TABLE bindings (binding_key INTEGER PRIMARY KEY, delivery_id TEXT, rx_id TEXT);
      CREATE TABLE readings (tote_key INTEGER NOT NULL, ts INTEGER NOT NULL, binding_key INTEGER, temp_c REAL NOT NULL,
        battery REAL, humidity REAL, lat REAL, lng REAL, seq INTEGER, received_at INTEGER NOT NULL, late INTEGER NOT NULL,
        UNIQUE (tote_key, ts));
      CREATE INDEX readings_by_binding ON readings (binding_key, ts);
      INSERT INTO totes VALUES (1, 'tt_old');
      INSERT INTO bindings VALUES (1, 'dl_old', 'rx_old');`)
    const insert = db.prepare('INSERT INTO readings VALUES (1, ?, ?, 4.5, NULL, NULL, NULL, NULL, NULL, ?, 0)')
    db.transaction(() => {
      for (let i = 0; i < 30_000; i++) insert.run(D0 + i * MIN, i < 100 ? 1 : null, D0 + i * MIN + 5)
    })()
    db.close()
    const s = sink(path)
    return (async () => {
      expect(await s.count()).toBe(30_000)
      expect(await s.readingsForDelivery('dl_old', 0, Number.MAX_SAFE_INTEGER)).toHaveLength(100)
      const day3 = await s.readingsForTote('tt_old', D0 + 3 * DAY, D0 + 4 * DAY)
      expect(day3).toHaveLength(1440)
      expect(day3[0]).toEqual(readingRow({ tote_id: 'tt_old', ts: D0 + 3 * DAY, temp_c: 4.5, received_at: D0 + 3 * DAY + 5 }))
      expect(tables(path)).not.toContain('readings')
      expect(statSync(path).size).toBeGreaterThan(0)
    })()
  })
})

describe('expiry', () => {
  const NOW = D0 + 30 * DAY
  const request = (over: Partial<ExpiryRequest> = {}): ExpiryRequest => ({
    unboundBeforeMs: NOW - 7 * DAY,
    boundBeforeMs: NOW - 20 * DAY,
    keepDeliveries: new Set(),
    limit: 100_000,
    ...over,
  })
  const expireAll = async (s: SqliteReadingSink, r: ExpiryRequest) => {
    let removed = 0
    for (;;) {
      const pass = await s.expire!(r)
      removed += pass.removed
      if (!pass.more) return removed
    }
  }
  /** Readings once an hour for 30 days: day 0–1 delivery dl_old (ended), days 25–29 dl_open; the rest unbound. */
  function month(tote = 'tt_m'): ReadingRow[] {
    return Array.from({ length: 30 * 24 }, (_, h) => {
      const ts = D0 + h * 3_600_000
      const delivery = h < 48 ? 'dl_old' : h >= 25 * 24 ? 'dl_open' : null
      return readingRow({ tote_id: tote, ts, delivery_id: delivery, rx_id: delivery && `rx_${delivery}` })
    })
  }

  for (const compacted of [false, true]) {
    describe(compacted ? 'on compacted days' : 'on row tables', () => {
      it('removes unbound readings past their retention and bound ones past theirs, keeps open and kept deliveries', async () => {
        const s = sink()
        await s.write(month())
        if (compacted) await compactAll(s)
        // dl_old ended long ago but is kept (inside its retention): only unbound readings before day 23 go.
        const removed = await expireAll(s, request({ keepDeliveries: new Set(['dl_old', 'dl_open']) }))
        expect(removed).toBe(21 * 24)
        expect(await s.readingsForDelivery('dl_old', 0, Infinity)).toHaveLength(48)
        const left = await s.readingsForTote('tt_m', 0, Infinity)
        expect(left.filter((r) => r.delivery_id === null).map((r) => r.ts)[0]).toBe(NOW - 7 * DAY)
        // Now dl_old is past its retention: its readings go, dl_open's (open) stay however old.
        expect(await expireAll(s, request({ keepDeliveries: new Set(['dl_open']), boundBeforeMs: NOW }))).toBe(48)
        expect(await s.readingsForDelivery('dl_old', 0, Infinity)).toEqual([])
        expect(await s.readingsForDelivery('dl_open', 0, Infinity)).toHaveLength(5 * 24)
        expect(await s.count()).toBe(2 * 24 + 5 * 24)
      })

      it('judges each reading by the binding it has at the pass, after a backdated re-binding', async () => {
        const s = sink()
        await s.write(month())
        if (compacted) await compactAll(s)
        // A dispatch recorded late binds days 3–5, unbound until now, to the open delivery dl_late.
        await s.attribute('tt_m', { deliveryId: 'dl_late', rxId: 'rx_late', fromMs: D0 + 3 * DAY, toMs: null })
        // ...and dl_late's own end, recorded late too, makes day 6 onwards nobody's again.
        await s.attribute('tt_m', { deliveryId: 'dl_late', rxId: 'rx_late', fromMs: D0 + 3 * DAY, toMs: D0 + 6 * DAY })
        if (compacted) await compactAll(s)
        await expireAll(s, request({ keepDeliveries: new Set(['dl_late', 'dl_open']), boundBeforeMs: NOW }))
        expect(await s.readingsForDelivery('dl_late', 0, Infinity)).toHaveLength(3 * 24)
        expect(await s.readingsForDelivery('dl_open', 0, Infinity)).toHaveLength(5 * 24)
        const unbound = (await s.readingsForTote('tt_m', 0, Infinity)).filter((r) => r.delivery_id === null)
        expect(unbound.every((r) => r.ts >= NOW - 7 * DAY)).toBe(true)
      })

      it('takes at most about `limit` readings a pass and says when more are due', async () => {
        const s = sink()
        await s.write(month())
        if (compacted) await compactAll(s)
        // Nothing bound is due, so no day is dropped whole: rows go 10 at a time, chunks (a day's, here) whole.
        const limited = request({ limit: 10, boundBeforeMs: D0, keepDeliveries: new Set(['dl_open']) })
        const first = await s.expire!(limited)
        expect(first).toEqual({ removed: compacted ? 24 : 10, more: true })
        const rest = await expireAll(s, limited)
        expect(first.removed + rest).toBe(21 * 24)
      })
    })
  }

  describe('of a day the unbound cut-off falls inside, a few readings a batch', () => {
    const CUTOFF = D0 + 13 * 3_600_000
    const TOTES = 40
    /** 40 totes every 10 minutes for a day, unbound but tt_01's delivery dl_x from 2 h to 4 h (kept). */
    const day = (): ReadingRow[] =>
      Array.from({ length: TOTES * 144 }, (_, i) => {
        const [tote, ts] = [Math.floor(i / 144), D0 + (i % 144) * 10 * MIN]
        const bound = tote === 1 && ts >= D0 + 2 * 3_600_000 && ts < D0 + 4 * 3_600_000
        return readingRow({
          tote_id: `tt_${String(tote).padStart(2, '0')}`,
          ts,
          delivery_id: bound ? 'dl_x' : null,
          rx_id: bound ? 'rx_x' : null,
        })
      })
    const straddling = request({ unboundBeforeMs: CUTOFF, boundBeforeMs: D0, keepDeliveries: new Set(['dl_x']), limit: 50 })
    const expectOnlyUnboundBeforeCutoffGone = async (s: SqliteReadingSink, late: ReadingRow[] = []) => {
      const stored = [...day(), ...late]
      const gone = stored.filter((r) => r.delivery_id === null && r.ts < CUTOFF)
      expect(await s.count()).toBe(stored.length - gone.length)
      for (let tote = 0; tote < TOTES; tote++) {
        const left = await s.readingsForTote(`tt_${String(tote).padStart(2, '0')}`, 0, Infinity)
        expect(left.filter((r) => r.delivery_id === null).every((r) => r.ts >= CUTOFF)).toBe(true)
      }
      expect(await s.readingsForDelivery('dl_x', 0, Infinity)).toHaveLength(12)
    }
    for (const index of ['(binding_key, tote_key, first_ts)', '(binding_key, first_ts)'])
      for (const limit of [50, 100_000])
        it(`removes exactly the unbound readings before it, ${limit} a batch, with the binding index on ${index}`, async () => {
          const path = join(dir, `straddle-${files++}.db`)
          let s = sink(path)
          await s.write(day())
          await compactAll(s)
          if (index === '(binding_key, first_ts)') {
            await s.close()
            open.splice(open.indexOf(s), 1)
            const file = new Database(path)
            withTimeOrderedBindingIndex(file)
            file.close()
            s = sink(path)
          }
          let batches = 0
          for (let more = true; more; batches++) more = (await s.expire!({ ...straddling, limit })).more
          // 50: a straddling chunk a batch; 100,000: all of them (more than one read's worth) in one.
          expect(batches).toBe(limit === 50 ? TOTES + 1 : 1)
          await expectOnlyUnboundBeforeCutoffGone(s)
        })

    it('leaves nothing before the cut-off of the last batch of a pass, though the cut-off moved during it', async () => {
      const s = sink()
      await s.write(day())
      await compactAll(s)
      for (let i = 0; i < 5; i++) expect((await s.expire!(straddling)).more).toBe(true)
      // The expirer takes `now` for each batch: an hour later the totes done first have more to lose,
      // and a batch that reaches the last tote with budget left must go back for them.
      const later = { ...straddling, unboundBeforeMs: CUTOFF + 3_600_000, limit: 100_000 }
      await expireAll(s, later)
      for (let tote = 0; tote < TOTES; tote++) {
        const left = await s.readingsForTote(`tt_${String(tote).padStart(2, '0')}`, 0, Infinity)
        expect(left.filter((r) => r.delivery_id === null && r.ts < later.unboundBeforeMs)).toEqual([])
      }
      expect(await s.readingsForDelivery('dl_x', 0, Infinity)).toHaveLength(12)
    })

    it('also removes what was packed, mid-pass, behind the tote the last batch stopped at', async () => {
      const s = sink()
      await s.write(day())
      await compactAll(s)
      for (let i = 0; i < 5; i++) expect((await s.expire!(straddling)).more).toBe(true)
      // Late readings of the first tote, before the cut-off, packed into a chunk of their own.
      const late = [readingRow({ tote_id: 'tt_00', ts: D0 + 5 * MIN }), readingRow({ tote_id: 'tt_00', ts: D0 + 6 * MIN })]
      await s.write(late)
      await compactAll(s)
      await expireAll(s, straddling)
      await expectOnlyUnboundBeforeCutoffGone(s, late)
    })
  })

  it('drops a whole day when nothing in it is kept', async () => {
    const path = join(dir, 'drop.db')
    const s = sink(path)
    await s.write(month())
    await compactAll(s)
    expect(tables(path)).toHaveLength(30)
    await expireAll(s, request({ keepDeliveries: new Set(['dl_open']), boundBeforeMs: NOW }))
    expect(tables(path)).toEqual([
      'chunks_day_20117',
      'chunks_day_20118',
      'chunks_day_20119',
      'chunks_day_20120',
      'chunks_day_20121',
      'chunks_day_20122',
      'chunks_day_20123',
    ])
    expect(await s.count()).toBe(7 * 24)
  })

  it('keeps every reading of a kept delivery bound under several prescriptions, in chunks and late rows, whatever the limit', async () => {
    for (const limit of [1, 249, 250, 251, 5_000]) {
      const path = join(dir, `kept-${files++}.db`)
      const s = sink(path)
      const kept = (tote: number, h: number): [string, string] | [null, null] =>
        tote === 5 && h >= 3 && h < 6 ? ['dl_k', 'rx_a'] : tote === 7 && h >= 10 && h < 13 ? ['dl_k', 'rx_b'] : [null, null]
      const day = (d: number, bind = (_t: number, _h: number): [string | null, string | null] => [null, null]) =>
        Array.from({ length: 300 * 24 }, (_, i) => {
          const [tote, h] = [Math.floor(i / 24), i % 24]
          const [delivery, rx] = bind(tote, h)
          return readingRow({ tote_id: `tt_${tote}`, ts: D0 + d * DAY + h * 3_600_000, delivery_id: delivery, rx_id: rx })
        })
      await s.write([...day(0, kept), ...day(1)])
      await compactAll(s)
      // A late reading of dl_k under a third prescription lands in a compacted day's row table.
      await s.write([readingRow({ tote_id: 'tt_x', ts: D0 + DAY + 5, delivery_id: 'dl_k', rx_id: 'rx_c' })])
      const everything = request({ unboundBeforeMs: NOW, boundBeforeMs: NOW, limit })
      await expireAll(s, { ...everything, keepDeliveries: new Set(['dl_k']) })
      expect(await s.readingsForDelivery('dl_k', 0, Infinity)).toHaveLength(7)
      expect(await s.count()).toBe(7)
      expect(await expireAll(s, everything)).toBe(7)
      expect(tables(path)).toEqual([])
    }
  })

  it('empties a whole day at most `limit` stored rows a batch, and drops its tables once empty', async () => {
    const path = join(dir, 'drop-in-batches.db')
    const s = sink(path)
    await s.write([...month('tt_a'), ...month('tt_b')])
    await compactAll(s)
    // limit 1: one chunk (a tote's day of unbound hourly readings) a batch, however many readings it holds.
    const oneRow = request({ keepDeliveries: new Set(['dl_open']), boundBeforeMs: NOW, limit: 1 })
    expect(await s.expire!(oneRow)).toEqual({ removed: 24, more: true })
    expect(tables(path)).toHaveLength(30)
    expect(await s.count()).toBe(2 * 30 * 24 - 24)
    expect(await expireAll(s, oneRow)).toBe(2 * 23 * 24 - 24)
    expect(tables(path)).toHaveLength(7)
    expect(await s.count()).toBe(2 * 7 * 24)
  })
})
