import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { KyselyPlugin } from 'kysely'
import type { Outbox } from '../../src/events/outbox.js'
import { openEntityStore, type EntityStore } from '../../src/store/database.js'
import { createColdChainStore } from '../../src/telemetry/cold-chain-monitor.js'
import type { ReadingRow, ReadingSink } from '../../src/timeseries/sink.js'

/** Counts the statements a Kysely instance runs. */
function counting() {
  const counter = { statements: 0 }
  const plugin: KyselyPlugin = {
    transformQuery: (args) => ((counter.statements += 1), args.node),
    transformResult: async (args) => args.result,
  }
  return { counter, plugin }
}

const BOUND_FROM = '2026-03-01T08:00:00.000Z'

/** Deliveries rows bound to a tote from BOUND_FROM (until `boundTo`, or still open). */
async function boundDeliveries(store: EntityStore, ids: readonly string[], boundTo: string | null = null) {
  await store.db
    .insertInto('deliveries')
    .values(
      ids.map((id, i) => ({
        id,
        rx_id: `rx_${id}`,
        pharmacy_id: 'ph_1',
        status: 'in_transit',
        eta: BOUND_FROM,
        tote_id: `tt_${id}_${i}`,
        cold_chain_required: 1,
        bound_from: BOUND_FROM,
        bound_to: boundTo,
        version: 1,
        event_seq: 1,
        leg: 1,
        created_at: BOUND_FROM,
        updated_at: BOUND_FROM,
      })),
    )
    .execute()
}

describe('the cold-chain monitor’s SQL store on a cold start', () => {
  let store: EntityStore
  beforeAll(async () => {
    store = await openEntityStore({ kind: 'sqlite', file: ':memory:' })
    await boundDeliveries(store, [...Array.from({ length: 1_000 }, (_, i) => `dl_${i}`), 'r_1', 'r_2', 'r_3', 'new_delivery'])
  })
  afterAll(async () => {
    await store.close()
  })

  it('reads the saved summaries of 1,000 deliveries loaded at once in a few statements, not one each', async () => {
    const { counter, plugin } = counting()
    const sink = { readingsForDelivery: async () => [] } as unknown as ReadingSink
    const coldChain = createColdChainStore({ db: store.db.withPlugin(plugin), sink, outbox: {} as Outbox })
    const ids = Array.from({ length: 1_000 }, (_, i) => `dl_${i}`)
    const answers = await Promise.all(ids.map((id) => coldChain.announcedBreak(id)))
    expect(answers.every((a) => a === null)).toBe(true)
    expect(counter.statements).toBeLessThanOrEqual(2) // 500 ids per statement
  })

  it('reads the stored readings of 1,000 deliveries one at a time, leaving the sink’s other connections to ingest writes', async () => {
    let reading = 0
    let most = 0
    const sink = {
      readingsForDelivery: async (id: string): Promise<ReadingRow[]> => {
        most = Math.max(most, ++reading)
        await new Promise((resolve) => setImmediate(resolve))
        reading -= 1
        return [{ delivery_id: id } as ReadingRow]
      },
    } as unknown as ReadingSink
    const coldChain = createColdChainStore({ db: store.db, sink, outbox: {} as Outbox })
    const ids = Array.from({ length: 1_000 }, (_, i) => `dl_${i}`)
    const answers = await Promise.all(ids.map((id, i) => coldChain.readings(id, i % 2 === 0)))
    expect(answers.map((rows) => rows[0]!.delivery_id)).toEqual(ids)
    expect(most).toBe(1)
  })

  it('reads a delivery being loaded before the recomputes already waiting', async () => {
    const order: string[] = []
    const sink = {
      readingsForDelivery: async (id: string): Promise<ReadingRow[]> => {
        await new Promise((resolve) => setImmediate(resolve))
        order.push(id)
        return []
      },
    } as unknown as ReadingSink
    const coldChain = createColdChainStore({ db: store.db, sink, outbox: {} as Outbox })
    const recomputes = ['r_1', 'r_2', 'r_3'].map((id) => coldChain.readings(id, false))
    const load = coldChain.readings('new_delivery', true)
    await Promise.all([...recomputes, load])
    expect(order).toEqual(['r_1', 'new_delivery', 'r_2', 'r_3']) // r_1 was already being read
  })

  it('reads a delivery’s readings over its binding interval only, never over all time', async () => {
    await boundDeliveries(store, ['dl_ended'], '2026-03-01T09:30:00.000Z')
    const asked: [string, number, number][] = []
    const sink = {
      readingsForDelivery: async (id: string, fromMs: number, toMs: number): Promise<ReadingRow[]> => (asked.push([id, fromMs, toMs]), []),
    } as unknown as ReadingSink
    const coldChain = createColdChainStore({ db: store.db, sink, outbox: {} as Outbox })
    await Promise.all([coldChain.readings('dl_1', true), coldChain.readings('dl_ended', false)])
    expect(await coldChain.readings('dl_never_dispatched', true)).toEqual([])
    expect(asked).toEqual([
      ['dl_1', Date.parse(BOUND_FROM), Number.MAX_SAFE_INTEGER], // still open: everything from its dispatch on
      ['dl_ended', Date.parse(BOUND_FROM), Date.parse('2026-03-01T09:30:00.000Z')],
    ])
  })
})
