import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { NewEvent } from '../../src/events/outbox.js'
import { postgresStore, reachablePostgres, sqliteStore, type StoreUnderTest } from '../helpers/stores.js'
import type { TestApi } from '../helpers/service.js'

const { url: postgresUrl } = await reachablePostgres()
const stores: StoreUnderTest[] = [sqliteStore, ...(postgresUrl ? [postgresStore(postgresUrl)] : [])]

describe.each(stores)('the outbox appending several events at once on $name', (store) => {
  let api: TestApi
  let admin: string
  beforeAll(async () => {
    api = await store.start()
    admin = await api.adminToken()
  })
  afterAll(async () => {
    await api.stop()
    await store.cleanup()
  })

  const stored = async (deliveryId: string) =>
    (
      await api.service.db
        .selectFrom('events')
        .select(['type', 'seq', 'dedupe_key'])
        .where('delivery_id', '=', deliveryId)
        .orderBy('seq')
        .execute()
    ).filter((e) => e.type.startsWith('temperature.'))

  it('numbers them per delivery in order, keeps one per dedupe key, and queues their webhooks', async () => {
    const pharmacy = await api.pharmacy(admin)
    const hook = await api.post('/v1/webhooks', admin, {
      url: 'http://127.0.0.1:9/hooks',
      events: ['temperature.excursion'],
      pharmacy_id: pharmacy.id,
    })
    expect(hook.status, hook.text).toBe(201)
    const a = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const b = await api.prescription(admin, { pharmacy_id: pharmacy.id })
    const event = (deliveryId: string, type: string, key: string): NewEvent => ({
      type,
      pharmacy_id: pharmacy.id,
      delivery_id: deliveryId,
      data: { key },
      dedupe_key: key,
    })
    const { outbox, db } = api.service
    const append = (events: NewEvent[]) => db.transaction().execute((trx) => outbox.append(trx, events))
    const seqBefore = async (id: string) =>
      (await db.selectFrom('deliveries').select('event_seq').where('id', '=', id).executeTakeFirstOrThrow()).event_seq

    const [aSeq, bSeq] = [await seqBefore(a.delivery_id), await seqBefore(b.delivery_id)]
    await append([event(a.delivery_id, 'temperature.excursion', 'x1')]) // stored before: a later batch skips it
    const appended = await append([
      event(a.delivery_id, 'temperature.excursion', 'x1'),
      event(a.delivery_id, 'temperature.recovered', 'r1'),
      event(b.delivery_id, 'temperature.excursion', 'x1'),
      event(a.delivery_id, 'temperature.excursion', 'x2'),
      event(a.delivery_id, 'temperature.excursion', 'x2'), // twice in one batch: once
    ])

    expect(appended.events.map((e) => [e.delivery_id, e.type, e.seq])).toEqual([
      [a.delivery_id, 'temperature.recovered', aSeq + 2],
      [b.delivery_id, 'temperature.excursion', bSeq + 1],
      [a.delivery_id, 'temperature.excursion', aSeq + 3],
    ])
    expect(appended.messages).toBe(2) // the endpoint hears excursions only
    expect(await stored(a.delivery_id)).toEqual([
      { type: 'temperature.excursion', seq: aSeq + 1, dedupe_key: 'x1' },
      { type: 'temperature.recovered', seq: aSeq + 2, dedupe_key: 'r1' },
      { type: 'temperature.excursion', seq: aSeq + 3, dedupe_key: 'x2' },
    ])
    const ids = appended.events.map((e) => e.id)
    const messages = await db.selectFrom('webhook_messages').select('event_id').where('event_id', 'in', ids).execute()
    expect(messages.map((m) => m.event_id).sort()).toEqual([ids[1], ids[2]].sort())
  })
})
