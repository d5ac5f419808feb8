import { randomBytes } from 'node:crypto'
import { afterAll, describe, expect, it } from 'vitest'
import { openEntityStore, type EntityStore } from '../../src/store/database.js'
import { insertRow, insertRows, precompiled } from '../../src/store/precompiled.js'
import { reachablePostgres } from '../helpers/stores.js'

const { url } = await reachablePostgres()
const schema = `precompiled_${randomBytes(4).toString('hex')}`
const stores: EntityStore[] = []
afterAll(async () => {
  for (const store of stores) {
    if (store.dialect === 'postgres') await store.db.schema.dropSchema(schema).ifExists().cascade().execute()
    await store.close()
  }
})

const pharmacy = (id: string, name: string) => ({
  id,
  name,
  ncpdp_id: null,
  npi: id.endsWith('1') ? '1234567893' : undefined,
  address: '{}',
  timezone: 'UTC',
  location: null,
  writeback: null,
  created_at: '2026-11-23T00:00:00.000Z',
})

// One query compiled once per dialect, then only bound: same rows as kysely builds them each time.
const byNameAndZone = precompiled((db, name: string, timezone: string) =>
  db
    .selectFrom('pharmacies')
    .select(['id', 'npi'])
    .where('name', '=', name)
    .where('timezone', '=', timezone)
    .where('ncpdp_id', 'is', null)
    .orderBy('id'),
)

describe.each([
  ['sqlite', () => openEntityStore({ kind: 'sqlite', file: ':memory:' })],
  ['postgres', () => openEntityStore({ kind: 'postgres', url: url!, schema })],
] as const)('precompiled queries on %s', (name, open) => {
  it.skipIf(name === 'postgres' && !url)("binds each call's own arguments, keeps constants, and omits undefined columns", async () => {
    const store = await open()
    stores.push(store)
    await insertRow(store.db, 'pharmacies', pharmacy('ph_1', 'North'))
    await insertRow(store.db, 'pharmacies', pharmacy('ph_2', 'North'))
    await insertRow(store.db, 'pharmacies', pharmacy('ph_3', 'South'))
    expect(await byNameAndZone(store.db, 'North', 'UTC')).toEqual([
      { id: 'ph_1', npi: '1234567893' },
      { id: 'ph_2', npi: null },
    ])
    expect(await byNameAndZone(store.db, 'South', 'UTC')).toEqual([{ id: 'ph_3', npi: null }])
    expect(await byNameAndZone(store.db, 'South', 'Europe/Paris')).toEqual([])
    // Inside a transaction, the same compiled text.
    const inTransaction = await store.db.transaction().execute((trx) => byNameAndZone(trx, 'North', 'UTC'))
    expect(inTransaction.map((r) => r.id)).toEqual(['ph_1', 'ph_2'])
  })

  it.skipIf(name === 'postgres' && !url)('inserts a batch of any size in chunks, every row with its own values', async () => {
    const store = stores.at(-1)!
    const rows = Array.from({ length: 300 }, (_, i) => ({
      ...pharmacy(`ph_batch_${String(i).padStart(3, '0')}`, `Batch ${i}`),
      npi: i % 2 ? `npi-${i}` : undefined,
    }))
    await insertRows(store.db, 'pharmacies', rows) // 128 + 128 + 32 + 8 + 4
    const back = await store.db
      .selectFrom('pharmacies')
      .select(['id', 'name', 'npi'])
      .where('id', 'like', 'ph_batch_%')
      .orderBy('id')
      .execute()
    expect(back).toEqual(rows.map((r, i) => ({ id: r.id, name: `Batch ${i}`, npi: i % 2 ? `npi-${i}` : null })))
  })
})
