import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { GroupCommitter } from '../../src/telemetry/group-commit.js'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'
import { readingRow } from '../helpers/reading-row.js'

const row = (ts: number): ReadingRow => readingRow({ tote_id: 'tt_group', ts })

/** A sink whose writes finish only when the test says so, recording what each one held. */
function controlledSink(concurrentWrites?: number) {
  const writes: { rows: readonly ReadingRow[]; finish: (error?: Error) => void }[] = []
  const sink = {
    concurrentWrites,
    write: (rows: readonly ReadingRow[]) =>
      new Promise<void>((resolve, reject) => {
        writes.push({ rows, finish: (error) => (error ? reject(error) : resolve()) })
      }),
  } as unknown as ReadingSink
  return { sink, writes }
}

const settledState = async (promise: Promise<unknown>) => {
  let state = 'pending'
  promise.then(
    () => (state = 'resolved'),
    () => (state = 'rejected'),
  )
  await new Promise((resolve) => setImmediate(resolve))
  return state
}

describe('GroupCommitter', () => {
  // The gather window is a timer: the tests move the clock past it instead of sleeping.
  beforeEach(() => void vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] }))
  afterEach(() => void vi.useRealTimers())
  const pastTheWindow = (ms: number) => vi.advanceTimersByTimeAsync(ms)

  it('writes the publishes of a few milliseconds in one transaction and answers each only once it committed', async () => {
    const { sink, writes } = controlledSink()
    const committer = new GroupCommitter(sink, 5)
    const a = committer.write([row(1)])
    const b = committer.write([row(2), row(3)])
    await pastTheWindow(5)
    expect(writes.map((w) => w.rows.map((r) => r.ts))).toEqual([[1, 2, 3]])
    expect(await settledState(a)).toBe('pending')
    writes[0]!.finish()
    await expect(Promise.all([a, b])).resolves.toEqual([undefined, undefined])
  })

  it('rejects every publish of a group whose write failed, and writes the next group', async () => {
    const { sink, writes } = controlledSink()
    const committer = new GroupCommitter(sink, 1)
    const a = committer.write([row(1)])
    const b = committer.write([row(2)])
    await pastTheWindow(1)
    const c = committer.write([row(3)]) // gathered while the first group is being written
    writes[0]!.finish(new Error('disk full'))
    await expect(a).rejects.toThrow('disk full')
    await expect(b).rejects.toThrow('disk full')
    await pastTheWindow(1)
    expect(writes[1]!.rows.map((r) => r.ts)).toEqual([3])
    writes[1]!.finish()
    await expect(c).resolves.toBeUndefined()
  })

  it('settled() waits for the rows handed over before it, not for later ones', async () => {
    const { sink, writes } = controlledSink()
    const committer = new GroupCommitter(sink, 1)
    void committer.write([row(1)])
    const settled = committer.settled()
    await pastTheWindow(1)
    void committer.write([row(2)]) // after settled() was asked: not waited for
    expect(await settledState(settled)).toBe('pending')
    writes[0]!.finish()
    expect(await settledState(settled)).toBe('resolved') // while row 2 is not committed
    await expect(new GroupCommitter(controlledSink().sink).settled()).resolves.toBeUndefined() // nothing pending
  })

  it('keeps several writes in flight on a sink that allows it, and answers them in the order they were made', async () => {
    const { sink, writes } = controlledSink(3)
    const committer = new GroupCommitter(sink, 1)
    const seen: number[][] = []
    committer.onCommitted((rows) => seen.push(rows.map((r) => r.ts)))
    const publishes: Promise<void>[] = []
    for (let ts = 1; ts <= 4; ts++) {
      publishes.push(committer.write([row(ts)]))
      await pastTheWindow(1) // each its own group
    }
    expect(writes.map((w) => w.rows.map((r) => r.ts))).toEqual([[1], [2], [3]]) // the fourth waits for a slot
    writes[2]!.finish()
    writes[1]!.finish(new Error('refused'))
    expect(await settledState(publishes[2]!)).toBe('pending') // committed, but the first group has not answered yet
    await vi.waitFor(() => expect(writes).toHaveLength(4)) // a slot came free
    writes[0]!.finish()
    writes[3]!.finish()
    await expect(publishes[0]).resolves.toBeUndefined()
    await expect(publishes[1]).rejects.toThrow('refused')
    await expect(publishes[2]).resolves.toBeUndefined()
    await expect(publishes[3]).resolves.toBeUndefined()
    expect(seen).toEqual([[1], [3], [4]])
  })

  it('names the totes whose rows are gathered or being written, until their group is committed or has failed', async () => {
    const { sink, writes } = controlledSink(2)
    const committer = new GroupCommitter(sink, 1)
    const of = (tote: string, ts: number) => readingRow({ tote_id: tote, ts })
    const a = committer.write([of('tt_a', 1)])
    expect([...committer.storingTotes()]).toEqual(['tt_a']) // gathered
    await pastTheWindow(1)
    const b = committer.write([of('tt_a', 2), of('tt_b', 2)])
    await pastTheWindow(1)
    expect([...committer.storingTotes()].sort()).toEqual(['tt_a', 'tt_b']) // both groups being written
    writes[0]!.finish()
    await a
    expect([...committer.storingTotes()].sort()).toEqual(['tt_a', 'tt_b']) // tt_a's second publish is still on its way
    writes[1]!.finish(new Error('disk full'))
    await expect(b).rejects.toThrow('disk full')
    expect(committer.storingTotes().size).toBe(0)
  })

  it('names none once its oldest write has been on its way 30 s: a stuck store does not hide a gap', async () => {
    const { sink, writes } = controlledSink()
    let now = 1_000
    const committer = new GroupCommitter(sink, 1, 10_000, () => now)
    const a = committer.write([readingRow({ tote_id: 'tt_a', ts: 1 })])
    await pastTheWindow(1)
    now += 29_999
    expect(committer.storingTotes().has('tt_a')).toBe(true)
    now += 1
    expect(committer.storingTotes().has('tt_a')).toBe(false)
    writes[0]!.finish()
    await a
    void committer.write([readingRow({ tote_id: 'tt_a', ts: 2 })]) // a new publish, the store answering again: on its way
    expect(committer.storingTotes().has('tt_a')).toBe(true)
  })
})
