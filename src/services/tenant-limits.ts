import { sql } from 'kysely'
import { AppError } from '../errors.js'
import type { Dialect } from '../store/database.js'
import type { Db, Executor } from '../store/schema.js'

export type Owner = { pharmacy_id: string | null; fleet_id: string | null }

/**
 * Creates one more of a tenant's things only while it has fewer than `max`: the count and the
 * insert run in one transaction, which on SQLite runs alone and on PostgreSQL first takes a
 * lock held per tenant and kind, so concurrent creations cannot pass the limit together.
 * One more is refused with 409 `limit_exceeded`.
 */
export async function createWithinLimit<T>(
  store: { db: Db; dialect: Dialect },
  limit: { what: string; max: number; owner: Owner },
  count: (trx: Executor) => Promise<number>,
  create: (trx: Executor) => Promise<T>,
): Promise<T> {
  return store.db.transaction().execute(async (trx) => {
    if (store.dialect === 'postgres') {
      const key = `${limit.what}:${limit.owner.pharmacy_id ?? ''}:${limit.owner.fleet_id ?? ''}`
      await sql`select pg_advisory_xact_lock(hashtext(${key}))`.execute(trx)
    }
    const have = await count(trx)
    if (have >= limit.max) {
      const tenant = limit.owner.pharmacy_id ?? limit.owner.fleet_id ?? 'the deployment'
      throw new AppError('limit_exceeded', `${tenant} already has ${have} ${limit.what}, the most allowed; remove one first.`, {
        limit: limit.max,
        resource: limit.what.replace(/ /g, '_'),
      })
    }
    return create(trx)
  })
}

/** `count(*)` of the owner's rows in a table with pharmacy_id and fleet_id columns. */
export async function countOwned(trx: Executor, table: 'oauth_clients' | 'totes' | 'webhook_endpoints', owner: Owner): Promise<number> {
  let query = trx.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n'))
  query = owner.pharmacy_id === null ? query.where('pharmacy_id', 'is', null) : query.where('pharmacy_id', '=', owner.pharmacy_id)
  query = owner.fleet_id === null ? query.where('fleet_id', 'is', null) : query.where('fleet_id', '=', owner.fleet_id)
  // Only webhook_endpoints has `kind` (it also stores write-back endpoints, which do not count).
  if (table === 'webhook_endpoints') query = query.where(sql<boolean>`kind = ${'webhook'}`)
  const row = await query.executeTakeFirstOrThrow()
  return Number(row.n)
}
