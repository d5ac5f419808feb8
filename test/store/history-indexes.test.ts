import { CompiledQuery, sql, type KyselyPlugin, type RootOperationNode } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Principal } from '../../src/auth/scopes.js'
import { EventFeed } from '../../src/events/event-cursor.js'
import { listDeliveries } from '../../src/services/delivery-list.js'
import type { Db } from '../../src/store/schema.js'
import { ToteBindings } from '../../src/telemetry/bindings.js'
import { openColdChainBindings } from '../../src/telemetry/open-deliveries.js'
import type { TestApi } from '../helpers/service.js'
import { waitFor } from '../helpers/wait.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * Reads that must cost the same with a year of history as with none (bench:history measures
 * them): the pharmacist's attention queue, one delivery's events, the open cold-chain deliveries
 * and the bindings of publishing totes. Each is read from an index
 * in the query's own order, so the first page never sorts or scans every delivery or event ever
 * stored. The plans of the very queries the service runs (captured from its own code) on SQLite
 * and PostgreSQL; PostgreSQL is told to avoid sequential scans and sorts where it can, since on a
 * test's few rows it would rightly prefer them.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

/** The SQL (and values) of every query the service's code makes through `db`. */
function capturing(db: Db) {
  const queries: RootOperationNode[] = []
  const plugin: KyselyPlugin = {
    transformQuery: ({ node }) => (queries.push(node), node),
    transformResult: async ({ result }) => result,
  }
  return { db: db.withPlugin(plugin), compiled: () => queries.map((node) => db.getExecutor().compileQuery(node, { queryId: '' })) }
}

const admin = (pharmacyId: string | null): Principal => ({
  ...{ clientId: 'cl_admin', sub: 'cl_admin', jti: 'j', exp: Number.MAX_SAFE_INTEGER },
  ...{ scopes: new Set(['deliveries:read', 'events:read']), pharmacyId, fleetId: null },
})

function describePlans(store: StoreUnderTest) {
  describe(`history-bounded reads on ${store.name}`, () => {
    let api: TestApi
    let pharmacyId: string
    let deliveryId: string
    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })
    beforeAll(async () => {
      api = await store.start()
      const token = await api.adminToken()
      pharmacyId = (await api.pharmacy(token)).id
      for (let i = 0; i < 3; i++) deliveryId = (await api.prescription(token, { pharmacy_id: pharmacyId })).delivery_id
    })

    /** The plan of `query` as text, one line per step. */
    async function plan(query: CompiledQuery): Promise<string> {
      const { db, dialect } = api.service.store
      if (dialect === 'sqlite') {
        const rows = await db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${query.sql}`, [...query.parameters]))
        return rows.rows.map((r) => r.detail).join('\n')
      }
      return db.transaction().execute(async (trx) => {
        await sql`set local enable_seqscan = off`.execute(trx)
        await sql`set local enable_sort = off`.execute(trx)
        const rows = await trx.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${query.sql}`, [...query.parameters]))
        return rows.rows.map((r) => r['QUERY PLAN']).join('\n')
      })
    }

    it.each([
      ['the whole deployment', null, 'deliveries_attention'],
      ['one pharmacy', 'pharmacy', 'deliveries_pharmacy_attention'],
    ])("reads the attention queue's first page of %s in index order, without a sort", async (_, scope, index) => {
      const { store: s } = api.service
      const { db, compiled } = capturing(s.db)
      const filter = scope ? { pharmacy_id: pharmacyId, order: 'attention' as const } : { order: 'attention' as const }
      const page = await listDeliveries({ db, dialect: s.dialect }, admin(null), filter, { limit: 50 })
      expect(page.data).toHaveLength(3)
      const queue = compiled().find((q) => q.sql.includes('attention'))!
      const text = await plan(queue)
      expect(text).toContain(index)
      expect(text).not.toMatch(/TEMP B-TREE|Sort|Seq Scan/)
    })

    it("reads a fleet's deliveries from the fleet index, partial since migration 0068 (it holds the rows of a fleet only)", async () => {
      const { store: s } = api.service
      const { db, compiled } = capturing(s.db)
      await listDeliveries({ db, dialect: s.dialect }, { ...admin(null), fleetId: 'fl_none' }, {}, { limit: 50 })
      const text = await plan(compiled().find((q) => q.sql.includes('"fleet_id" ='))!)
      expect(text).toContain('deliveries_fleet')
      expect(text).not.toMatch(/SCAN deliveries|TEMP B-TREE|Sort|Seq Scan/)
    })

    it("reads one delivery's events from an index on the delivery, not by scanning every event", async () => {
      const { store: s } = api.service
      const { db, compiled } = capturing(s.db)
      const feed = new EventFeed({ db, dialect: s.dialect })
      // On PostgreSQL the feed shows an event once every transaction older than its own has ended,
      // and other suites' transactions on the same server can hold that back for a moment.
      let types: string[] = []
      await waitFor(
        async () => {
          types = (await feed.readEventsAfter(null, 100, { deliveryId })).events.map((e) => e.type)
          return types.length > 0
        },
        10_000,
        "the delivery's event in the feed",
      )
      expect(types).toEqual(['delivery.created'])
      const events = compiled().find((q) => /from "events"/.test(q.sql) && q.sql.includes('delivery_id'))!
      const text = await plan(events)
      expect(text).toContain('events_delivery')
      expect(text).not.toMatch(/SCAN events|TEMP B-TREE|Sort|Seq Scan/)
    })

    it('reads the open cold-chain deliveries from an index of open deliveries only', async () => {
      const { store: s } = api.service
      const { db, compiled } = capturing(s.db)
      await openColdChainBindings(db)
      const text = await plan(compiled().find((q) => q.sql.includes('bound_to'))!)
      // PostgreSQL: the open bindings' covering index, read alone whatever the planner estimates (migration 0066).
      expect(text).toContain(store.name === 'postgres' ? 'deliveries_open_bindings' : 'deliveries_open_cold_chain')
      expect(text).not.toMatch(/deliveries_tote\b|deliveries_bound_from|SCAN deliveries|Seq Scan/)
    })

    it("reads publishing totes' bindings from the open and the recently ended bindings' indexes, not from every trip ever made", async () => {
      const { store: s } = api.service
      const { db, compiled } = capturing(s.db)
      await new ToteBindings(db, { now: () => Date.now() }).forTote('tt_someone')
      const text = await plan(compiled().find((q) => q.sql.includes('union all'))!)
      expect(text).toMatch(/deliveries_open_(tote|cold_chain|bindings)\b/) // each holds open deliveries only
      expect(text).toContain('deliveries_tote_ended')
      expect(text).not.toMatch(/deliveries_bound_from|deliveries_tote\b|SCAN deliveries|Seq Scan/)
    })
  })
}

describePlans(sqliteStore)
if (url) describePlans(postgresStore(url))
