// The "no signal" intervals a pharmacist reads in the trace, the chart's list and the report: one
// interval per silence, never two overlapping accounts of one gap, never "for 0 s".
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { mergeNoSignal, silencesBetweenPoints } from '../../src/domain/no-signal.js'
import type { TraceExcursion } from '../../src/domain/temperature-trace.js'

const T0 = Date.UTC(2026, 10, 27, 9, 0, 0)
/** As of: past every interval here. */
const AS_OF = T0 + 2 * 3_600_000
const iso = (ms: number) => new Date(ms).toISOString()

const intervalArb = fc.record({
  kind: fc.constantFrom('unknown', 'unknown', 'high', 'low') as fc.Arbitrary<TraceExcursion['kind']>,
  fromMs: fc.integer({ min: 0, max: 3_600_000 }),
  // Zero and sub-second lengths on purpose: they are what the pharmacist must not see.
  lengthMs: fc.oneof(fc.constantFrom(0, 1, 400, 999), fc.integer({ min: 0, max: 900_000 })),
  open: fc.boolean(),
})

function excursion(i: { kind: TraceExcursion['kind']; fromMs: number; lengthMs: number; open: boolean }): TraceExcursion {
  return {
    started_at: iso(T0 + i.fromMs),
    ended_at: i.open ? null : iso(T0 + i.fromMs + i.lengthMs),
    // An open interval's duration runs to as of, as the trace gives it.
    duration_s: (i.open ? AS_OF - T0 - i.fromMs : i.lengthMs) / 1000,
    peak_c: i.kind === 'unknown' ? null : 9,
    kind: i.kind,
  }
}

const span = (e: TraceExcursion) => ({ from: Date.parse(e.started_at), to: e.ended_at === null ? AS_OF : Date.parse(e.ended_at) })

describe('no-signal intervals in a trace', () => {
  it('are sorted, disjoint and at least a second long; other excursions are kept as they were', () => {
    fc.assert(
      fc.property(fc.array(intervalArb, { maxLength: 30 }), (input) => {
        const out = mergeNoSignal(input.map(excursion))
        const silences = out.filter((e) => e.kind === 'unknown')
        for (const s of silences) {
          expect(s.duration_s).toBeGreaterThanOrEqual(1)
          if (s.ended_at !== null) expect(Date.parse(s.ended_at) - Date.parse(s.started_at)).toBe(Math.round(s.duration_s * 1000))
        }
        for (let i = 1; i < silences.length; i++) {
          const before = silences[i - 1]!
          expect(before.ended_at, 'only the last silence may be open').not.toBeNull()
          expect(Date.parse(before.ended_at!)).toBeLessThan(Date.parse(silences[i]!.started_at))
        }
        const others = input.filter((i) => i.kind !== 'unknown').map(excursion)
        expect(out.filter((e) => e.kind !== 'unknown')).toEqual(expect.arrayContaining(others))
        expect(out.length - silences.length).toBe(others.length)
        const starts = out.map((e) => Date.parse(e.started_at))
        expect(starts).toEqual([...starts].sort((a, b) => a - b))
      }),
    )
  })

  it('hold every silence of a second or more, each inside one interval that starts and ends where a silence did', () => {
    fc.assert(
      fc.property(fc.array(intervalArb, { maxLength: 30 }), (input) => {
        const silences = input.filter((i) => i.kind === 'unknown').map(excursion)
        const out = mergeNoSignal(silences).map(span)
        const spans = silences.map(span)
        for (const s of spans.filter((s) => s.to - s.from >= 1000)) {
          expect(out.some((o) => o.from <= s.from && s.to <= o.to)).toBe(true)
        }
        for (const o of out) {
          expect(spans.some((s) => s.from === o.from)).toBe(true)
          expect(spans.some((s) => s.to === o.to)).toBe(true)
        }
      }),
    )
  })

  it('makes one interval of two accounts of one gap (the case pharmacists saw: "09:27:48 for 4 s" beside "09:27:49 for 3 s")', () => {
    const engine: TraceExcursion = {
      started_at: iso(T0 + 48_000),
      ended_at: iso(T0 + 52_000),
      duration_s: 4,
      peak_c: null,
      kind: 'unknown',
    }
    const buckets: TraceExcursion = {
      started_at: iso(T0 + 49_000),
      ended_at: iso(T0 + 52_000),
      duration_s: 3,
      peak_c: null,
      kind: 'unknown',
    }
    const sliver: TraceExcursion = {
      started_at: iso(T0 + 90_000),
      ended_at: iso(T0 + 90_000),
      duration_s: 0,
      peak_c: null,
      kind: 'unknown',
    }
    expect(mergeNoSignal([buckets, sliver, engine])).toEqual([engine])
  })

  it('finds the silences between bucketed points past max_gap_s', () => {
    const minute = 60_000
    // Buckets of a minute at 0, 1, 20 and 21 minutes; max_gap_s 15 min: unknown from 2 + 15 = 17 min to 20 min.
    const out = silencesBetweenPoints(
      [0, 1, 20, 21].map((m) => T0 + m * minute),
      minute,
      15 * minute,
    )
    expect(out).toEqual([
      { started_at: iso(T0 + 17 * minute), ended_at: iso(T0 + 20 * minute), duration_s: 180, peak_c: null, kind: 'unknown' },
    ])
  })
})
