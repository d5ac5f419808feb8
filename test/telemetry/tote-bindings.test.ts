import { SelectQueryNode, type KyselyPlugin, type QueryResult, type UnknownRow } from 'kysely'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { openEntityStore, type EntityStore } from '../../src/store/database.js'
import { ToteBindings } from '../../src/telemetry/bindings.js'

/**
 * Holds every read's answer until the test lets it through, and counts the reads started: a slow
 * database, under the test's control.
 */
function slowReads() {
  const held: (() => void)[] = []
  let started = 0
  const plugin: KyselyPlugin = {
    // Counted when built, before the query waits for SQLite's one connection (a read queued behind
    // a held one never reaches transformResult). The read is a union, whose branches come here
    // too, as selects without set operations: only the statement itself is counted.
    transformQuery: (args) => {
      if (!SelectQueryNode.is(args.node) || args.node.setOperations) started++
      return args.node
    },
    transformResult: async (args): Promise<QueryResult<UnknownRow>> => {
      await new Promise<void>((resolve) => held.push(resolve))
      return args.result
    },
  }
  return {
    plugin,
    started: () => started,
    /** Lets the oldest held read answer. */
    release: () => held.shift()?.(),
    waiting: () => held.length,
  }
}

const tick = () => new Promise((resolve) => setImmediate(resolve))

describe('ToteBindings', () => {
  let store: EntityStore
  beforeEach(async () => {
    store = await openEntityStore({ kind: 'sqlite', file: ':memory:' })
  })
  afterEach(async () => {
    await store.close()
  })

  it('keeps one read in flight while the database is slow, and answers the totes missed meanwhile with the next', async () => {
    const reads = slowReads()
    const bindings = new ToteBindings(store.db.withPlugin(reads.plugin), { now: () => Date.now() })

    const first = bindings.forTote('tt_a')
    await tick()
    expect(reads.started()).toBe(1)

    // Publishes of other totes while the first read is held: no second read at once (concurrent
    // reads each refreshed every stale entry, and under load they multiplied).
    const later = [bindings.forTote('tt_b'), bindings.forTote('tt_c'), bindings.forTote('tt_b')]
    await tick()
    expect(reads.started()).toBe(1)

    reads.release()
    expect(await first).toEqual([])
    await tick()
    expect(reads.started()).toBe(2) // one read for tt_b and tt_c together
    reads.release()
    expect(await Promise.all(later)).toEqual([[], [], []])
    expect(reads.waiting()).toBe(0)
  })

  it("reads a late upload's tote back to its oldest reading once, and caches that reach", async () => {
    const reads = slowReads()
    const bindings = new ToteBindings(store.db.withPlugin(reads.plugin), { now: () => Date.now() })
    const monthAgo = Date.now() - 30 * 86_400_000

    // A gateway's buffer from a month ago, in two publishes: one read for both.
    const both = [bindings.forTote('tt_a', monthAgo), bindings.forTote('tt_a', monthAgo + 1_000)]
    await tick()
    expect(reads.started()).toBe(1)
    reads.release()
    expect(await Promise.all(both)).toEqual([[], []])

    // Its next publish is answered from the cache; one reaching further back reads again.
    expect(bindings.cached('tt_a', monthAgo + 2_000)).toEqual([])
    const older = bindings.forTote('tt_a', monthAgo - 86_400_000)
    await tick()
    expect(reads.started()).toBe(2)
    reads.release()
    expect(await older).toEqual([])
  })
})
