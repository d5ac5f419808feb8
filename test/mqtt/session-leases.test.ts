import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { IngestSessionLeases } from '../../src/mqtt/session-leases.js'
import { openEntityStore, type EntityStore } from '../../src/store/database.js'
import { postgresSchemas, reachablePostgres } from '../helpers/stores.js'

/**
 * The leases behind adopting a dead copy's MQTT session (docs/deployment.md, Guarantees): one
 * survivor adopts it, never two; the dead copy, coming back, takes it back from the adopter.
 */
const { url, reasons } = await reachablePostgres()
if (!url) console.warn(`Skipping the ingest session lease suite: ${reasons.join('; ')}`)
const schemas = postgresSchemas(url ?? 'postgres://unreachable')

describe.skipIf(!url)('ingest session leases on PostgreSQL', () => {
  let store: EntityStore
  beforeAll(async () => {
    store = await openEntityStore({ kind: 'postgres', url: url!, schema: await schemas.create() })
  })
  afterAll(async () => {
    await store?.close()
    await schemas.drop()
  })

  it('hands a dead copy’s session to exactly one survivor, and back to that copy when it returns', async () => {
    // The dying copy's leases run out at once; the survivors' last a minute.
    const dying = new IngestSessionLeases(store.db, 0)
    const one = new IngestSessionLeases(store.db, 60_000)
    const other = new IngestSessionLeases(store.db, 60_000)
    await one.renew(['one_0'])
    await other.renew(['other_0'])
    await dying.renew(['dying_0', 'dying_1'])

    await expect.poll(async () => (await one.claimExpired(['one_0'])).length + (await other.claimExpired(['other_0'])).length).toBe(2)
    const held = async (clientId: string) => [await one.holds(clientId), await other.holds(clientId)].filter(Boolean).length
    expect(await held('dying_0')).toBe(1)
    expect(await held('dying_1')).toBe(1)
    // A live copy's session is never claimed, its own or another's.
    expect([...(await one.claimExpired(['one_0'])), ...(await other.claimExpired(['other_0']))]).toEqual([])

    // The dead copy comes back: it takes its leases back before it connects.
    const adopter = (await one.holds('dying_0')) ? one : other
    const returned = new IngestSessionLeases(store.db, 60_000)
    await returned.renew(['dying_0', 'dying_1'])
    expect(await adopter.holds('dying_0')).toBe(false)
    await adopter.forget('dying_0') // the adopter, finishing late, removes nothing of the returned copy's
    await adopter.release('dying_0')
    expect(await returned.holds('dying_0')).toBe(true)
    expect([...(await one.claimExpired(['one_0'])), ...(await other.claimExpired(['other_0']))]).toEqual([])
  })
})
