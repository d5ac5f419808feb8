import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startTestService, type TestApi } from '../helpers/service.js'

// SQLite group commit: the transactions of one event-loop turn share one COMMIT at the turn's
// end. An API read in that turn must not answer with what that COMMIT may still lose.
describe('API reads while a group commit is open (SQLite)', () => {
  let api: TestApi
  let admin: string
  let deliveryId: string
  let pharmacyId: string

  beforeAll(async () => {
    api = await startTestService()
    admin = await api.adminToken()
    pharmacyId = (await api.pharmacy(admin)).id
    deliveryId = (await api.prescription(admin, { pharmacy_id: pharmacyId })).delivery_id
    // A deferred foreign key is checked at COMMIT: a row breaking it makes its group's COMMIT fail.
    await sql`create table doomed (id integer primary key, delivery_id text references deliveries(id) deferrable initially deferred)`.execute(
      api.service.db,
    )
    await sql`pragma foreign_keys = on`.execute(api.service.db)
  })
  afterAll(() => api.stop())

  /**
   * Answers `request` while another transaction appends an event in the same turn, in a group
   * whose COMMIT then fails: the transaction starts the moment the handler calls `events.list`,
   * as when two requests' work meets in one turn under load.
   */
  async function duringDoomedGroup<T>(request: () => Promise<T>) {
    const { db, outbox, services } = api.service
    const events = services.events
    const list = events.list
    let doomed: Promise<unknown> | undefined
    events.list = (...args) => {
      doomed = db.transaction().execute(async (trx) => {
        await outbox.append(trx, [
          { type: 'writeback.completed', pharmacy_id: pharmacyId, delivery_id: deliveryId, data: { never: 'committed' } },
        ])
        await sql`insert into doomed (delivery_id) values ('dl_nowhere')`.execute(trx)
      })
      return list.apply(events, args)
    }
    try {
      const answer = await request()
      await expect(doomed).rejects.toThrow(/FOREIGN KEY/)
      return answer
    } finally {
      events.list = list
    }
  }

  it('GET /v1/events lists no event whose transaction never committed', async () => {
    const before = await api.get<{ data: { id: string }[] }>('/v1/events', admin)
    const answer = await duringDoomedGroup(() => api.get<{ data: { type: string; data: unknown }[] }>('/v1/events', admin))
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.data.map((e) => e.data)).not.toContainEqual({ never: 'committed' })
    expect(answer.body.data).toHaveLength(before.body.data.length)
  })

  it('GET /v1/events?after= lists no event whose transaction never committed', async () => {
    const first = (await api.get<{ data: { id: string }[] }>('/v1/events', admin)).body.data[0]!
    const answer = await duringDoomedGroup(() => api.get<{ data: { data: unknown }[] }>(`/v1/events?after=${first.id}`, admin))
    expect(answer.status, answer.text).toBe(200)
    expect(answer.body.data.map((e) => e.data)).not.toContainEqual({ never: 'committed' })
  })
})
