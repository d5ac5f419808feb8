import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { TestApi } from '../helpers/service.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'

/**
 * GET /v1/events read page after page (`after` = the last event seen, as a tailing consumer
 * does) misses nothing. On PostgreSQL the trap is two transactions where the one that took the
 * lower position commits later: a reader that moved past the higher position must still get the
 * lower one once it commits.
 */

const { url, reasons } = await reachablePostgres()
if (!url && process.env.CI) throw new Error(`PostgreSQL is unreachable: ${reasons.join('; ')}`)

function describeTailing(store: StoreUnderTest) {
  describe(`the event feed on ${store.name}`, () => {
    let api: TestApi
    let admin: string
    let pharmacyId: string
    afterAll(async () => {
      await api?.stop()
      await store.cleanup()
    })
    beforeAll(async () => {
      api = await store.start()
      admin = await api.adminToken()
      pharmacyId = (await api.pharmacy(admin)).id
    })

    /** One tailing consumer: remembers the last event id it saw and asks for what came after. */
    function tailer(startAfter: string) {
      const seen: string[] = []
      let after = startAfter
      const poll = async () => {
        for (;;) {
          const page = await api.get(`/v1/events?after=${after}&limit=2`, admin)
          if (page.status !== 200) throw new Error(`GET /v1/events answered ${page.status}: ${page.text}`)
          for (const event of page.body.data) seen.push(event.id)
          if (page.body.data.length) after = page.body.data.at(-1).id
          if (page.body.data.length < 2) return
        }
      }
      return {
        seen,
        poll,
        /** poll(), then everything seen so far: for expect.poll until what is listed catches up. */
        pollAll: async () => {
          await poll()
          return [...seen]
        },
      }
    }

    /**
     * The delivery's first event, once listed: on PostgreSQL the feed lists an event only once every
     * older transaction on the server has ended, and other test files start services (a migration
     * is one transaction) on the same server.
     */
    async function firstEventOf(deliveryId: string): Promise<string> {
      const listed = async () => (await api.get(`/v1/events?delivery_id=${deliveryId}`, admin)).body.data as { id: string }[]
      await expect.poll(listed, { timeout: 20_000 }).not.toHaveLength(0)
      return (await listed())[0]!.id
    }

    const append = (trx: Parameters<TestApi['service']['outbox']['append']>[0], what: string) =>
      api.service.outbox.append(trx, [{ type: 'test.tailing', pharmacy_id: pharmacyId, data: { what } }]).then((a) => a.events[0]!.id)

    it('lists every event page after page, in the order it listed them', async () => {
      const start = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
      const anchor = await firstEventOf(start)
      const written: string[] = []
      for (let i = 0; i < 5; i++) written.push(await api.service.db.transaction().execute((trx) => append(trx, `e${i}`)))
      const reader = tailer(anchor)
      await expect.poll(reader.pollAll, { timeout: 20_000 }).toEqual(written)
    })

    it("answers another tenant's event id in after= as it answers an unknown one (404)", async () => {
      const other = (await api.pharmacy(admin)).id
      const theirs = (await api.prescription(admin, { pharmacy_id: other })).delivery_id
      const theirEvent = await firstEventOf(theirs)
      const client = (
        await api.post('/v1/oauth/clients', admin, { client_name: 'one pharmacy', scope: 'deliveries:read', pharmacy_id: pharmacyId })
      ).body
      const mine = await api.tokenFor(client.client_id, client.client_secret)
      const foreign = await api.get(`/v1/events?after=${theirEvent}`, mine)
      const unknown = await api.get('/v1/events?after=evt_00000000000000000000000000', mine)
      expect([foreign.status, foreign.body.code]).toEqual([404, 'not_found'])
      expect(foreign.body.detail).toBe(unknown.body.detail)
    })

    // SQLite has one writer at a time: two transactions cannot overlap there.
    if (store.name === 'postgres')
      it('sees an event whose transaction took the lower position and committed later', async () => {
        const start = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
        const anchor = await firstEventOf(start)
        const reader = tailer(anchor)

        // The first transaction writes its event (the lower position) and stays open…
        let commitFirst!: () => void
        let firstWritten!: (id: string) => void
        const firstId = new Promise<string>((resolve) => (firstWritten = resolve))
        const first = api.service.db.transaction().execute(async (trx) => {
          firstWritten(await append(trx, 'lower position, commits last'))
          await new Promise<void>((resolve) => (commitFirst = resolve))
        })
        const lower = await firstId
        // …while a second writes a higher position and commits.
        try {
          await api.service.db.transaction().execute((trx) => append(trx, 'higher position, commits first'))
          await reader.poll() // the consumer reads while the lower position is still uncommitted
        } finally {
          commitFirst()
          await first
        }
        await expect.poll(reader.pollAll, { timeout: 20_000 }).toHaveLength(2)
        const written = await api.service.db
          .selectFrom('events')
          .select(['id', 'pos'])
          .where('type', '=', 'test.tailing')
          .orderBy('pos')
          .execute()
        const [lowerPos, higherPos] = written.slice(-2)
        expect(lowerPos!.id).toBe(lower) // the transaction that committed last took the lower position
        expect(reader.seen).toEqual([lower, higherPos!.id])
      })
  })
}

describeTailing(sqliteStore)
if (url) describeTailing(postgresStore(url))
