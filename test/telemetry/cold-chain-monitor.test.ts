import { readFileSync } from 'node:fs'
import { describe, expect, it, vi } from 'vitest'
import { ColdChainMonitor } from '../../src/telemetry/cold-chain-monitor.js'

const profile = JSON.parse(readFileSync(new URL('../../rules/profiles/refrigerated.json', import.meta.url), 'utf8'))
/** The deliveries table as the monitor reads it when it loads a delivery: no summary saved yet. */
const noSavedSummaries = { selectFrom: () => ({ select: () => ({ where: () => ({ executeTakeFirst: async () => undefined }) }) }) }
const open = (id: string) => ({
  toteId: `t_${id}`,
  binding: { deliveryId: id, rxId: `rx_${id}`, pharmacyId: 'ph_1', fleetId: null, profile, fromMs: 0, toMs: null },
})

describe('the cold-chain monitor watching open deliveries', () => {
  it('watches a delivery dispatched during a pass even when another delivery cannot be read', async () => {
    // Loading X's history fails (a transient read error); every other delivery loads.
    const sink = {
      readingsForDelivery: (id: string) =>
        new Promise((resolve, reject) => setTimeout(() => (id === 'X' ? reject(new Error('read failed')) : resolve([])), 5)),
    }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    const monitor = new ColdChainMonitor({
      db: noSavedSummaries,
      sink,
      outbox: {},
      clock: { now: () => Date.now() },
      metrics: {},
      logger: quiet,
      windowMs: 1_000,
    } as never)
    const first = monitor.watchOpenDeliveries([open('A'), open('X')])
    const second = monitor.watchOpenDeliveries([open('A'), open('X'), open('D')]) // D dispatched meanwhile
    await expect(first).rejects.toThrow('read failed') // X is still unreadable: the refresh retries it
    await expect(second).rejects.toThrow('read failed')
    expect(monitor.state('A')).toBeTruthy()
    expect(monitor.state('D')).toBeTruthy()
    expect(monitor.state('X')).toBeFalsy()
  })
})

describe('the cold-chain monitor saving delivery summaries', () => {
  // Every out-of-range reading opens an excursion and the next in-range one closes it: two events.
  const twitchy = {
    ...profile,
    name: 'twitchy',
    grace_s: 0,
    max_excursion_s: 86_400,
    max_cumulative_s: 86_400,
    hard_min_c: null,
    max_gap_s: 86_400,
  }
  const reading = (deliveryId: string, ts: number, temp_c: number) => ({
    tote_id: `t_${deliveryId}`,
    delivery_id: deliveryId,
    rx_id: `rx_${deliveryId}`,
    ts,
    temp_c,
    battery: null,
    humidity: null,
    lat: null,
    lng: null,
    seq: null,
    received_at: ts,
    late: false,
  })

  it('saves every changed summary of a tick even while 150 other deliveries raise events in every transaction', async () => {
    const written = new Map<string, number>() // delivery → transaction that saved its summary
    let transactions = 0
    let monitor!: ColdChainMonitor
    const hot = Array.from({ length: 150 }, (_, i) => `H${i}`)
    const calm = Array.from({ length: 300 }, (_, i) => `C${i}`)
    let hotTs = 1_000
    const record = (ids: unknown) => {
      for (const id of [ids].flat() as string[]) if (!written.has(id)) written.set(id, transactions)
    }
    const trx = {
      updateTable: () => ({ set: () => ({ where: (_c: string, _op: string, ids: unknown) => ({ execute: async () => record(ids) }) }) }),
    }
    const db = {
      ...noSavedSummaries,
      transaction: () => ({
        async execute(work: (t: unknown) => Promise<unknown>) {
          transactions += 1
          // Meanwhile the hot deliveries keep raising events (for the first 60 transactions).
          if (transactions <= 60) {
            monitor.accept(hot.map((id) => reading(id, hotTs + 500, 12)))
            monitor.accept(hot.map((id) => reading(id, hotTs + 1_000, 5)))
            hotTs += 1_000
          }
          return work(trx)
        },
      }),
    }
    let events = 0
    const outbox = {
      append: async (_t: unknown, appended: unknown[]) => ((events += appended.length), { events: [], messages: 0 }),
      committed() {},
    }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    monitor = new ColdChainMonitor({
      // The clock keeps up with the readings, so no one goes silent.
      db,
      sink: { readingsForDelivery: async () => [] },
      outbox,
      clock: { now: () => hotTs + 1_000 },
      metrics: { ruleEvaluation: { observe() {} } },
      logger: quiet,
      windowMs: 0,
    } as never)
    const bind = (id: string) => ({ ...open(id), binding: { ...open(id).binding, profile: twitchy } })
    await monitor.watchOpenDeliveries([...hot, ...calm].map(bind))
    monitor.accept(calm.map((id) => reading(id, 1_000, 5))) // one in-range reading each: changed, no event
    monitor.tick()
    await vi.waitFor(() => {
      expect(transactions).toBeGreaterThanOrEqual(61)
      expect(events).toBeGreaterThanOrEqual(60 * hot.length * 2) // an excursion and its recovery each, every time
      expect(calm.filter((id) => !written.has(id))).toEqual([])
    })
    // …and promptly: 20 of them at least ride along in every transaction.
    expect(Math.max(...calm.map((id) => written.get(id)!))).toBeLessThanOrEqual(Math.ceil(calm.length / 20) + 1)
  })
})

describe('the cold-chain monitor while stored readings are attributed to a delivery after the fact', () => {
  const quickGap = { ...profile, name: 'quick-gap', max_gap_s: 60 }
  const at = (deliveryId: string, ts: number, temp_c = 5) => ({
    tote_id: `t_${deliveryId}`,
    delivery_id: deliveryId,
    rx_id: `rx_${deliveryId}`,
    ts,
    temp_c,
    battery: null,
    humidity: null,
    lat: null,
    lng: null,
    seq: null,
    received_at: ts,
    late: false,
  })
  const T0 = Date.UTC(2026, 0, 1)
  function monitorWith(sink: { readingsForDelivery: (id: string) => Promise<unknown[]> }, clock: { now: () => number }) {
    const raised: string[] = []
    const trx = { updateTable: () => ({ set: () => ({ where: () => ({ execute: async () => undefined }) }) }) }
    const db = { ...noSavedSummaries, transaction: () => ({ execute: async (work: (t: unknown) => Promise<unknown>) => work(trx) }) }
    const outbox = {
      append: async (_t: unknown, events: { type: string }[]) => (raised.push(...events.map((e) => e.type)), { events: [], messages: 0 }),
      committed() {},
    }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    const monitor = new ColdChainMonitor({
      db,
      sink,
      outbox,
      clock,
      metrics: { ruleEvaluation: { observe() {} } },
      logger: quiet,
      windowMs: 0,
    } as never)
    const binding = { ...open('A'), binding: { ...open('A').binding, profile: quickGap, fromMs: T0 } }
    return { monitor, raised, binding }
  }

  it("keeps a held tote's readings and its silence unjudged until release", async () => {
    let now = T0 + 1_000
    const { monitor, raised, binding } = monitorWith({ readingsForDelivery: async () => [] }, { now: () => now })
    await monitor.watchOpenDeliveries([binding])
    monitor.hold('t_A')
    monitor.accept([at('A', T0 + 500)])
    expect(monitor.state('A')!.lastTs).toBeNull()
    now = T0 + 10 * 60_000 // ten minutes of wall-clock silence: a sensor gap, were it judged
    monitor.tick()
    await monitor.flush()
    expect(raised).toEqual([])
    monitor.release('t_A')
    expect(monitor.state('A')!.lastTs).toBe(T0 + 500)
  })

  it('rebuilds a delivery whose loading read the store before the attribution', async () => {
    const attributed = [at('A', T0 + 1_000, 3), at('A', T0 + 2_000, 4)]
    let reads = 0
    // The first read (the load) answers from before the attribution, and only after it was done.
    let loadRead!: () => void
    const loadHasRead = new Promise<void>((resolve) => (loadRead = resolve))
    const sink = {
      readingsForDelivery: async () => {
        if (++reads > 1) return attributed
        loadRead()
        return new Promise<unknown[]>((resolve) => setTimeout(() => resolve([]), 30)) // a slow store: answers after the attribution
      },
    }
    const { monitor, binding } = monitorWith(sink, { now: () => T0 + 3_000 })
    const loading = monitor.watchOpenDeliveries([binding])
    await loadHasRead
    await monitor.reattributed('A')
    await loading
    expect(monitor.state('A')).toMatchObject({ lastTs: T0 + 2_000, min_c: 3, max_c: 4 })
  })
})
