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

describe('the cold-chain monitor’s SQL store on a cold start', () => {
  let store: EntityStore
  beforeAll(async () => {
    store = await openEntityStore({ kind: 'sqlite', file: ':memory:' })
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
})
