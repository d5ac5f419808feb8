// The per-tote reorder window (SPEC §5 "Determinism", REORDER_WINDOW_S).
import { describe, expect, it } from 'vitest'
import { ReorderBuffer } from '../../rules/index.js'

const S = 1000
const r = (s: number, temp_c = 5) => ({ ts: s * S, temp_c })
const tss = (rs: readonly { ts: number }[]) => rs.map((x) => x.ts / S)

describe('ReorderBuffer', () => {
  it('holds a reading until the tote has sent one at least the window newer', () => {
    const buf = new ReorderBuffer(30 * S)
    expect(tss(buf.push(r(0), 0).released)).toEqual([])
    expect(tss(buf.push(r(10), 10 * S).released)).toEqual([])
    expect(tss(buf.push(r(29), 29 * S).released)).toEqual([])
    expect(tss(buf.push(r(30), 30 * S).released)).toEqual([0])
    expect(tss(buf.push(r(45), 45 * S).released)).toEqual([10])
    expect(buf.size).toBe(3)
  })

  it('releases out-of-order arrivals in ts order', () => {
    const buf = new ReorderBuffer(30 * S)
    for (const s of [20, 5, 12, 0]) buf.push(r(s), 21 * S)
    expect(tss(buf.push(r(42), 42 * S).released)).toEqual([0, 5, 12])
    expect(tss(buf.flushAll())).toEqual([20, 42])
  })

  it('drops duplicates (same ts) whether still held or already released', () => {
    const buf = new ReorderBuffer(30 * S)
    buf.push(r(0), 0)
    expect(buf.push(r(0, 9), 1 * S)).toEqual({ released: [], late: false, duplicate: true })
    buf.push(r(30), 30 * S) // releases 0
    expect(buf.push(r(0, 9), 31 * S)).toEqual({ released: [], late: true, duplicate: true })
  })

  it('flags readings older than what was released as late and keeps them out', () => {
    const buf = new ReorderBuffer(30 * S)
    buf.push(r(10), 10 * S)
    buf.push(r(40), 40 * S) // releases 10
    expect(buf.push(r(5), 41 * S)).toEqual({ released: [], late: true, duplicate: false })
    expect(tss(buf.flushAll())).toEqual([40])
  })

  it('releases everything after the window of wall-clock silence, not before', () => {
    const buf = new ReorderBuffer(30 * S)
    buf.push(r(0), 100 * S)
    buf.push(r(3), 103 * S)
    expect(buf.silentDeadline()).toBe(133 * S)
    expect(buf.flushSilent(132 * S)).toEqual([])
    expect(tss(buf.flushSilent(133 * S))).toEqual([0, 3])
    expect(buf.silentDeadline()).toBeNull()
    expect(buf.push(r(2), 134 * S).late).toBe(true)
  })

  it('late and duplicate readings do not restart the silence timer', () => {
    const buf = new ReorderBuffer(30 * S)
    buf.push(r(10), 10 * S)
    buf.push(r(40), 40 * S)
    buf.push(r(5), 60 * S) // late
    buf.push(r(40), 65 * S) // duplicate
    expect(tss(buf.flushSilent(70 * S))).toEqual([40])
  })

  it('with a zero window releases at once', () => {
    const buf = new ReorderBuffer(0)
    expect(tss(buf.push(r(5), 0).released)).toEqual([5])
    expect(buf.push(r(4), 0).late).toBe(true)
    expect(tss(buf.push(r(6), 0).released)).toEqual([6])
  })

  it('rejects a negative window', () => {
    expect(() => new ReorderBuffer(-1)).toThrow(RangeError)
  })
})
