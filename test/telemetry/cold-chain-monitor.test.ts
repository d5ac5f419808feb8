import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { ColdChainMonitor } from '../../src/telemetry/cold-chain-monitor.js'

const profile = JSON.parse(readFileSync(new URL('../../rules/profiles/refrigerated.json', import.meta.url), 'utf8'))
/** The deliveries table as the monitor reads it when it loads a delivery: no summary saved yet. */
const noSavedSummaries = { selectFrom: () => ({ select: () => ({ where: () => ({ executeTakeFirst: async () => undefined }) }) }) }
const open = (id: string) => ({ toteId: `t_${id}`, binding: { deliveryId: id, rxId: `rx_${id}`, pharmacyId: 'ph_1', fleetId: null, profile, fromMs: 0, toMs: null } })

describe('the cold-chain monitor watching open deliveries', () => {
  it('watches a delivery dispatched during a pass even when another delivery cannot be read', async () => {
    // Loading X's history fails (a transient read error); every other delivery loads.
    const sink = { readingsForDelivery: (id: string) => new Promise((resolve, reject) => setTimeout(() => (id === 'X' ? reject(new Error('read failed')) : resolve([])), 5)) }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    const monitor = new ColdChainMonitor({ db: noSavedSummaries, sink, outbox: {}, clock: { now: () => Date.now() }, metrics: {}, logger: quiet, windowMs: 1_000 } as never)
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
  const twitchy = { ...profile, name: 'twitchy', grace_s: 0, max_excursion_s: 86_400, max_cumulative_s: 86_400, hard_min_c: null, max_gap_s: 86_400 }
  const reading = (deliveryId: string, ts: number, temp_c: number) => ({
    tote_id: `t_${deliveryId}`, delivery_id: deliveryId, rx_id: `rx_${deliveryId}`, ts, temp_c,
    battery: null, humidity: null, lat: null, lng: null, seq: null, received_at: ts, late: false,
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
    const trx = { updateTable: () => ({ set: () => ({ where: (_c: string, _op: string, ids: unknown) => ({ execute: async () => record(ids) }) }) }) }
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
    const outbox = { append: async (_t: unknown, appended: unknown[]) => ((events += appended.length), { events: [], messages: 0 }), committed() {} }
    const quiet = { info() {}, error() {}, warn() {}, debug() {} }
    monitor = new ColdChainMonitor({
      // The clock keeps up with the readings, so no one goes silent.
      db, sink: { readingsForDelivery: async () => [] }, outbox, clock: { now: () => hotTs + 1_000 }, metrics: { ruleEvaluation: { observe() {} } }, logger: quiet, windowMs: 0,
    } as never)
    const bind = (id: string) => ({ ...open(id), binding: { ...open(id).binding, profile: twitchy } })
    await monitor.watchOpenDeliveries([...hot, ...calm].map(bind))
    monitor.accept(calm.map((id) => reading(id, 1_000, 5))) // one in-range reading each: changed, no event
    monitor.tick()
    while (transactions < 61) await new Promise((resolve) => setTimeout(resolve, 1))
    await new Promise((resolve) => setTimeout(resolve, 20))

    expect(events).toBeGreaterThanOrEqual(60 * hot.length * 2) // an excursion and its recovery each, every time
    const missing = calm.filter((id) => !written.has(id))
    expect(missing).toEqual([])
    // …and promptly: 20 of them at least ride along in every transaction.
    expect(Math.max(...calm.map((id) => written.get(id)!))).toBeLessThanOrEqual(Math.ceil(calm.length / 20) + 1)
  })
})
