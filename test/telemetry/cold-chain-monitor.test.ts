import { readFileSync } from 'node:fs'
import { describe, expect, it, vi } from 'vitest'
import { ColdChainMonitor } from '../../src/telemetry/cold-chain-monitor.js'
import type { ReadingRow } from '../../src/timeseries/sink.js'
import { FakeColdChainStore } from '../helpers/fake-cold-chain-store.js'
import { readingRow } from '../helpers/reading-row.js'

const refrigerated = JSON.parse(readFileSync(new URL('../../rules/profiles/refrigerated.json', import.meta.url), 'utf8'))
const quiet = { info() {}, error() {}, warn() {}, debug() {}, fatal() {}, trace() {} } as never
const T0 = Date.UTC(2026, 0, 1)

const open = (id: string, profile = refrigerated, fromMs = 0) => ({
  toteId: `t_${id}`,
  binding: { deliveryId: id, rxId: `rx_${id}`, pharmacyId: 'ph_1', fleetId: null, profile, fromMs, toMs: null },
})
const reading = (deliveryId: string, ts: number, temp_c = 5): ReadingRow =>
  readingRow({ tote_id: `t_${deliveryId}`, delivery_id: deliveryId, rx_id: `rx_${deliveryId}`, ts, temp_c })
/** 600 readings of delivery A a second apart from T0 + 2 s: more than the monitor keeps in memory. */
const judgedBefore = () => Array.from({ length: 600 }, (_, i) => reading('A', T0 + (i + 2) * 1_000, 5))
function monitorOn(store: FakeColdChainStore, now: () => number, windowMs = 0) {
  return new ColdChainMonitor({ store, clock: { now }, metrics: { ruleEvaluation: { observe() {} } }, logger: quiet, windowMs })
}

describe('the cold-chain monitor watching open deliveries', () => {
  it('watches a delivery dispatched during a pass even when another delivery cannot be read', async () => {
    const store = new FakeColdChainStore()
    // Loading X's history fails (a transient read error); every other delivery loads.
    store.read = (id) =>
      new Promise((resolve, reject) => setTimeout(() => (id === 'X' ? reject(new Error('read failed')) : resolve([])), 5))
    const monitor = monitorOn(store, () => Date.now(), 1_000)
    const first = monitor.watchOpenDeliveries([open('A'), open('X')])
    const second = monitor.watchOpenDeliveries([open('A'), open('X'), open('D')]) // D dispatched meanwhile
    await expect(first).rejects.toThrow('read failed') // X is still unreadable: the refresh retries it
    await expect(second).rejects.toThrow('read failed')
    expect(monitor.state('A')).toBeTruthy()
    expect(monitor.state('D')).toBeTruthy()
    expect(monitor.state('X')).toBeFalsy()
  })

  it('saves the summary of a delivery that ended and stops judging it', async () => {
    const store = new FakeColdChainStore()
    const monitor = monitorOn(store, () => T0 + 2_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([reading('A', T0 + 1_000, 4)])
    await monitor.watchOpenDeliveries([]) // A was delivered
    expect(store.summaries.get('A')).toMatchObject({ lastTs: T0 + 1_000, min_c: 4 })
    expect(monitor.state('A')).toBeUndefined()
  })
})

describe('the cold-chain monitor after a restart', () => {
  it('rebuilds a delivery from its stored readings without announcing its break again', async () => {
    const store = new FakeColdChainStore()
    const first = monitorOn(store, () => T0 + 5_000)
    await first.watchOpenDeliveries([open('A', refrigerated, T0)])
    const rows = [reading('A', T0 + 1_000, 5), reading('A', T0 + 2_000, -2)] // −2 °C: below the hard minimum
    store.stored.set('A', rows)
    first.accept(rows)
    await first.flush()
    expect(store.types()).toEqual(['cold-chain.break'])
    expect(store.summaries.get('A')?.broken?.reason).toBe('hard_limit') // saved with the event

    const restarted = monitorOn(store, () => T0 + 6_000)
    await restarted.watchOpenDeliveries([open('A', refrigerated, T0)])
    await restarted.flush()
    expect(restarted.state('A')).toMatchObject({ lastTs: T0 + 2_000, broken: { reason: 'hard_limit' } })
    expect(store.types()).toEqual(['cold-chain.break'])
  })

  it('keeps a break already announced even when the stored readings no longer show it', async () => {
    const store = new FakeColdChainStore()
    const first = monitorOn(store, () => T0 + 5_000)
    await first.watchOpenDeliveries([open('A', refrigerated, T0)])
    first.accept([reading('A', T0 + 1_000, -2)])
    await first.flush()
    store.stored.set('A', [reading('A', T0 + 1_000, 5)]) // what the store shows now (say, a corrected upload)

    const restarted = monitorOn(store, () => T0 + 6_000)
    await restarted.watchOpenDeliveries([open('A', refrigerated, T0)])
    expect(restarted.state('A')?.broken).toMatchObject({ reason: 'hard_limit', at: T0 + 1_000 })
  })
})

describe('the cold-chain monitor judging a group of readings', () => {
  it('judges a tote’s readings in event-time order when a group has them out of order, without reading the store again', async () => {
    // On an external broker a tote's readings come over several sessions: a group may hold a newer one first.
    const store = new FakeColdChainStore()
    let reads = 0
    store.read = async () => ((reads += 1), [])
    const monitor = monitorOn(store, () => T0 + 5_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([reading('A', T0 + 3_000, -2), reading('A', T0 + 1_000, 4), reading('A', T0 + 2_000, 6)])
    await monitor.flush()
    expect(reads).toBe(1) // the load; no recompute
    expect(monitor.state('A')).toMatchObject({ lastTs: T0 + 3_000, min_c: -2, max_c: 6, broken: { reason: 'hard_limit', at: T0 + 3_000 } })
    expect(store.types()).toEqual(['cold-chain.break'])
  })

  it('judges a reading older than one already judged from the readings it keeps, without reading the store, and raises what it reveals', async () => {
    const store = new FakeColdChainStore()
    let reads = 0
    store.read = async () => ((reads += 1), [])
    const monitor = monitorOn(store, () => T0 + 5_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([reading('A', T0 + 2_000, 5)])
    monitor.accept([reading('A', T0 + 1_000, -2)]) // a later group: late
    await monitor.flush()
    expect(reads).toBe(1) // the load; no recompute from the store
    expect(store.types()).toEqual(['cold-chain.break'])
    expect(store.summaries.get('A')).toMatchObject({ readings: 2, min_c: -2, broken: { reason: 'hard_limit', at: T0 + 1_000 } })
  })

  it('recomputes from the store a reading older than what it keeps in memory, and raises what it reveals', async () => {
    const store = new FakeColdChainStore()
    let reads = 0
    store.read = async (id) => ((reads += 1), [...store.stored.get(id)!])
    store.stored.set('A', judgedBefore()) // 600 readings: more than the monitor keeps
    const monitor = monitorOn(store, () => T0 + 3_600_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    const late = reading('A', T0 + 1_000, -2)
    store.stored.set('A', [late, ...judgedBefore()])
    monitor.accept([late])
    await monitor.flush()
    expect(reads).toBe(2) // the load, and the recompute
    expect(store.types()).toEqual(['cold-chain.break'])
    expect(store.summaries.get('A')).toMatchObject({ readings: 601, broken: { reason: 'hard_limit', at: T0 + 1_000 } })
  })

  it('rebuilds a delivery from what the store says after a backdated end took readings off it, not from what it judged before', async () => {
    const store = new FakeColdChainStore()
    const monitor = monitorOn(store, () => T0 + 9_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([reading('A', T0 + 1_000, 4), reading('A', T0 + 2_000, 6), reading('A', T0 + 3_000, 7)])
    store.stored.set('A', [reading('A', T0 + 1_000, 4)]) // the delivery ended at T0 + 1.5 s after all
    monitor.hold('t_A')
    await monitor.reattributed('A')
    monitor.release('t_A')
    expect(monitor.state('A')).toMatchObject({ lastTs: T0 + 1_000, readings: 1, max_c: 4 })
  })

  /** A delivery loaded with `n` readings a second apart from T0 + 1 s (more than the monitor keeps in memory), whose recompute's read waits for the test. */
  async function loadedWithGatedRecompute(n: number) {
    const store = new FakeColdChainStore()
    store.stored.set(
      'A',
      Array.from({ length: n }, (_, i) => reading('A', T0 + (i + 1) * 1_000, 5)),
    )
    let answerRead: (() => void) | undefined
    let reads = 0
    store.read = async (id) => {
      const held = [...store.stored.get(id)!] // what the store holds when the read begins
      if (++reads === 1) return held
      await new Promise<void>((resolve) => (answerRead = resolve))
      return held
    }
    const monitor = monitorOn(store, () => T0 + 3_600_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    const storeLate = (row: ReadingRow) => {
      const rows = store.stored.get('A')!
      rows.push(row)
      rows.sort((a, b) => a.ts - b.ts)
    }
    return { store, monitor, storeLate, readStarted: () => vi.waitFor(() => expect(answerRead).toBeDefined()), answer: () => answerRead!() }
  }

  it('judges a recent late reading with the older one whose recompute from the store is under way, not before it', async () => {
    const { store, monitor, storeLate, readStarted, answer } = await loadedWithGatedRecompute(1_000)
    const older = reading('A', T0 + 500, -1) // older than anything kept: recomputed from the store
    storeLate(older)
    monitor.accept([older])
    await readStarted()
    const recent = reading('A', T0 + 990_500, -3) // recent enough for memory, but the older one breaks first
    storeLate(recent)
    monitor.accept([recent])
    answer()
    await monitor.flush()
    expect(store.types()).toEqual(['cold-chain.break'])
    expect(store.summaries.get('A')).toMatchObject({ readings: 1_002, broken: { reason: 'hard_limit', at: T0 + 500 } })
  })

  it('keeps every reading judged while a recompute read the store, even more than it keeps in memory', async () => {
    const { monitor, storeLate, readStarted, answer } = await loadedWithGatedRecompute(600)
    const older = reading('A', T0 + 500, 6)
    storeLate(older)
    monitor.accept([older])
    await readStarted()
    // Judged meanwhile, committed after the read began: the store's answer lacks them.
    monitor.accept(Array.from({ length: 700 }, (_, i) => reading('A', T0 + (601 + i) * 1_000, 4)))
    answer()
    await monitor.flush()
    expect(monitor.state('A')).toMatchObject({ readings: 1_301, lastTs: T0 + 1_300_000, min_c: 4, max_c: 6, unknownMs: 0 })
  })
})

describe('the cold-chain monitor saving delivery summaries', () => {
  // Every out-of-range reading opens an excursion and the next in-range one closes it: two events.
  const twitchy = {
    ...refrigerated,
    name: 'twitchy',
    grace_s: 0,
    max_excursion_s: 86_400,
    max_cumulative_s: 86_400,
    hard_min_c: null,
    max_gap_s: 86_400,
  }

  it('saves every changed summary of a tick even while 150 other deliveries raise events in every save', async () => {
    const store = new FakeColdChainStore()
    const hot = Array.from({ length: 150 }, (_, i) => `H${i}`)
    const calm = Array.from({ length: 300 }, (_, i) => `C${i}`)
    let hotTs = 1_000
    // The clock keeps up with the readings, so no one goes silent.
    const monitor = monitorOn(store, () => hotTs + 1_000)
    // Meanwhile the hot deliveries keep raising events (during the first 60 saves).
    store.beforeSave = () => {
      if (store.saves > 60) return
      monitor.accept(hot.map((id) => reading(id, hotTs + 500, 12)))
      monitor.accept(hot.map((id) => reading(id, hotTs + 1_000, 5)))
      hotTs += 1_000
    }
    await monitor.watchOpenDeliveries([...hot, ...calm].map((id) => open(id, twitchy)))
    monitor.accept(calm.map((id) => reading(id, 1_000, 5))) // one in-range reading each: changed, no event
    monitor.tick()
    await expect.poll(() => store.saves).toBeGreaterThanOrEqual(61)
    await monitor.flush()

    expect(store.events.length).toBeGreaterThanOrEqual(60 * hot.length * 2) // an excursion and its recovery each, every time
    expect(calm.filter((id) => !store.summaries.has(id))).toEqual([])
    // …and promptly: 20 of them at least ride along in every save.
    expect(Math.max(...calm.map((id) => store.firstSavedIn.get(id)!))).toBeLessThanOrEqual(Math.ceil(calm.length / 20) + 1)
  })
})

describe('the cold-chain monitor while stored readings are attributed to a delivery after the fact', () => {
  const quickGap = { ...refrigerated, name: 'quick-gap', max_gap_s: 60 }

  it("keeps a held tote's readings and its silence unjudged until release", async () => {
    const store = new FakeColdChainStore()
    let now = T0 + 1_000
    const monitor = monitorOn(store, () => now)
    await monitor.watchOpenDeliveries([open('A', quickGap, T0)])
    monitor.hold('t_A')
    monitor.accept([reading('A', T0 + 500)])
    expect(monitor.state('A')!.lastTs).toBeNull()
    now = T0 + 10 * 60_000 // ten minutes of wall-clock silence: a sensor gap, were it judged
    monitor.tick()
    await monitor.flush()
    expect(store.types()).toEqual([])
    monitor.release('t_A')
    expect(monitor.state('A')!.lastTs).toBe(T0 + 500)
  })

  it('rebuilds a delivery whose loading read the store before the attribution', async () => {
    const store = new FakeColdChainStore()
    const attributed = [reading('A', T0 + 1_000, 3), reading('A', T0 + 2_000, 4)]
    let reads = 0
    // The first read (the load) answers from before the attribution, and only after it was done.
    let loadRead!: () => void
    const loadHasRead = new Promise<void>((resolve) => (loadRead = resolve))
    store.read = async () => {
      if (++reads > 1) return attributed
      loadRead()
      return new Promise<ReadingRow[]>((resolve) => setTimeout(() => resolve([]), 30)) // a slow store: answers after the attribution
    }
    const monitor = monitorOn(store, () => T0 + 3_000)
    const loading = monitor.watchOpenDeliveries([open('A', quickGap, T0)])
    await loadHasRead
    await monitor.reattributed('A')
    await loading
    expect(monitor.state('A')).toMatchObject({ lastTs: T0 + 2_000, min_c: 3, max_c: 4 })
    expect(store.summaries.get('A')).toMatchObject({ lastTs: T0 + 2_000 }) // saved at once
  })
})

describe('the cold-chain monitor recomputing late readings', () => {
  const late = () => ({ ...reading('A', T0 + 1_000, -2), late: true }) // below the hard limit: a break

  it('still raises the break a late reading reveals when the delivery ends before its recompute could read the store', async () => {
    const store = new FakeColdChainStore()
    store.stored.set('A', [late(), ...judgedBefore()])
    let reads = 0
    // The load answers with what was judged before, more than is kept in memory, so the late
    // reading is older than anything kept; the recompute's first read fails (it stays due for the
    // next tick); then the store is back.
    store.read = async (id) => {
      reads += 1
      if (reads === 1) return judgedBefore()
      if (reads === 2) throw new Error('read failed')
      return [...store.stored.get(id)!]
    }
    const monitor = monitorOn(store, () => T0 + 5_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([late()])
    await vi.waitFor(() => expect(reads).toBe(2))
    await monitor.watchOpenDeliveries([]) // A was delivered before the next tick
    await monitor.flush()
    expect(store.types()).toEqual(['cold-chain.break'])
    expect(store.summaries.get('A')?.broken).toMatchObject({ reason: 'hard_limit', at: T0 + 1_000 })
  })

  it('flush() waits for a recompute whose read is in flight', async () => {
    const store = new FakeColdChainStore()
    store.stored.set('A', [late(), ...judgedBefore()])
    let answerRead: (() => void) | undefined
    let reads = 0
    // The load answers at once with what was judged before, more than is kept in memory (the late
    // reading is older than anything kept); the recompute's read waits for the test.
    store.read = async (id) => {
      if (++reads === 1) return judgedBefore()
      await new Promise<void>((resolve) => (answerRead = resolve))
      return [...store.stored.get(id)!]
    }
    const monitor = monitorOn(store, () => T0 + 5_000)
    await monitor.watchOpenDeliveries([open('A', refrigerated, T0)])
    monitor.accept([late()])
    await vi.waitFor(() => expect(answerRead).toBeDefined())
    let flushed = false
    const flushing = monitor.flush().then(() => (flushed = true))
    await new Promise((resolve) => setImmediate(resolve)) // a flush that did not wait would be done by now
    expect(flushed).toBe(false)
    answerRead!()
    await flushing
    expect(store.types()).toEqual(['cold-chain.break'])
  })
})
