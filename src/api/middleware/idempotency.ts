import type { Context, MiddlewareHandler } from 'hono'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import type { Clock } from '../../clock.js'
import { iso } from '../../clock.js'
import { AppError } from '../../errors.js'
import { sha256Hex } from '../../hashing.js'
import { isUniqueViolation } from '../../store/errors.js'
import { insertRow, precompiled } from '../../store/precompiled.js'
import type { Database, Db, Executor } from '../../store/schema.js'
import type { AppEnv } from '../env.js'

const KEY_TTL_MS = 24 * 3_600_000 // SPEC §2: keys are kept 24 h
// A request still "in progress" after this long died with its process; its key may be retried.
const ABANDONED_AFTER_MS = 60_000
const printableAscii = /^[\x20-\x7e]{1,255}$/

/**
 * The claimed key of the request being handled. A handler whose effects commit in one
 * transaction calls `complete` inside it, so the effects and the stored answer commit together
 * (one commit fewer, and no window where the effects exist but the key still reads in progress).
 * `value` must be what the handler then answers with `c.json(value, status)`: the replay is its
 * JSON text, byte for byte.
 */
export type IdempotentRequest = {
  complete(trx: Executor, status: number, value: unknown): Promise<void>
}

type Stored = { request_hash: string; state: string; status: number | null; body: string | null; headers: string | null; created_at: string; expires_at: string }

/**
 * IETF Idempotency-Key semantics as Stripe implements them: the first request with a key runs,
 * a retry with the same body gets the stored response byte for byte, a different body is 422,
 * a retry while the first still runs is 409. Keys are scoped to the client. Only answers that
 * took effect (2xx) are stored: an error answer changed nothing, so its key is released and the
 * caller may retry, or correct the body and send it again under the same key (Stripe does not
 * save validation failures either).
 *
 * On paths where `recordedInTransaction` holds, the handler's transaction writes the key with
 * its answer (`IdempotentRequest.complete`): one commit per request instead of a claim commit
 * before it. While it runs, this process remembers the key, so a concurrent retry still gets
 * 409; a retry racing it on another instance conflicts on the key's primary key inside its own
 * transaction, gets 409 and leaves nothing behind.
 */
export function idempotency({ db, clock, requiredOn, recordedInTransaction = () => false }: {
  db: Db; clock: Clock; requiredOn: (path: string) => boolean; recordedInTransaction?: (path: string) => boolean
}): MiddlewareHandler<AppEnv> {
  /** `client_id \n key` → request hash, for keys whose claim commits with the request's effects. */
  const running = new Map<string, string>()

  return async function idempotencyMiddleware(c, next) {
    if (c.req.method !== 'POST') return next()
    const key = c.req.header('idempotency-key')
    if (key === undefined) {
      if (requiredOn(c.req.path)) throw new AppError('idempotency_key_missing', 'This request needs an Idempotency-Key header (1–255 printable ASCII characters).')
      return next()
    }
    if (!printableAscii.test(key)) {
      throw new AppError('validation_failed', 'Idempotency-Key must be 1–255 printable ASCII characters.', { errors: [{ pointer: '/headers/idempotency-key', message: 'must be 1–255 printable ASCII characters' }] })
    }
    const clientId = c.get('principal').clientId
    const requestHash = sha256Hex(`${c.req.method} ${c.req.path}\n${await c.req.text()}`)
    const now = clock.now()

    if (recordedInTransaction(c.req.path)) {
      const [stored] = await storedKey(db, clientId, key)
      const slot = `${clientId}\n${key}`
      const runningHash = running.get(slot)
      if (runningHash !== undefined) return answerFromStore(c, { request_hash: runningHash, state: 'in_progress' }, requestHash)
      if (stored && !reusable(stored, now)) return answerFromStore(c, stored, requestHash)
      // The row this request may replace (expired or abandoned); a newer one means another instance won.
      const replaces = stored?.created_at ?? ''
      const answer = (executor: Executor, status: number, body: string, headers: string) =>
        claimWithAnswer(executor, { client_id: clientId, key, request_hash: requestHash, state: 'done', status, body, headers, created_at: iso(now), expires_at: iso(now + KEY_TTL_MS) }, replaces)
      let recorded = false
      c.set('idempotency', {
        async complete(trx, status, value) {
          await answer(trx, status, JSON.stringify(value), JSON_HEADERS)
          recorded = true
        },
      })
      running.set(slot, requestHash)
      try {
        await next()
      } finally {
        running.delete(slot)
      }
      // A handler on such a path that did not record its answer: keep it now, after the fact.
      if (c.res.status < 400 && !recorded) await answer(db, c.res.status, await c.res.clone().text(), headersOf(c.res))
      return
    }

    const claimed = await db.insertInto('idempotency_keys').values({
      client_id: clientId, key, request_hash: requestHash, state: 'in_progress', status: null, body: null, headers: null,
      created_at: iso(now), expires_at: iso(now + KEY_TTL_MS),
    }).onConflict((oc) => oc.columns(['client_id', 'key']).doNothing()).executeTakeFirst()

    if (Number(claimed.numInsertedOrUpdatedRows ?? 0) === 0) {
      const stored = await db.selectFrom('idempotency_keys').selectAll().where('client_id', '=', clientId).where('key', '=', key).executeTakeFirst()
      if (stored && !reusable(stored, now)) return answerFromStore(c, stored, requestHash)
      // Expired or abandoned: take the key over, but only if nobody else did in the meantime.
      const taken = await db.updateTable('idempotency_keys')
        .set({ request_hash: requestHash, state: 'in_progress', status: null, body: null, headers: null, created_at: iso(now), expires_at: iso(now + KEY_TTL_MS) })
        .where('client_id', '=', clientId).where('key', '=', key).where('created_at', '=', stored?.created_at ?? '')
        .executeTakeFirst()
      if (Number(taken.numUpdatedRows) === 0) throw inProgress()
    }

    let completedInTransaction = false
    c.set('idempotency', {
      async complete(trx, status, value) {
        await storeAnswer(trx, clientId, key, status, JSON.stringify(value), JSON_HEADERS)
        completedInTransaction = true
      },
    })
    try {
      await next()
    } catch (error) {
      await release(db, clientId, key)
      throw error
    }
    if (c.res.status >= 400) return void (await release(db, clientId, key))
    if (completedInTransaction) return
    await storeAnswer(db, clientId, key, c.res.status, await c.res.clone().text(), headersOf(c.res))
  }
}

// What `c.json()` answers with; a replay sends the same.
const JSON_HEADERS = JSON.stringify({ 'content-type': 'application/json' })
const headersOf = (res: Response) => JSON.stringify({ 'content-type': res.headers.get('content-type') ?? 'application/json' })

/** A stored key may be taken over once it expired, or when its request died in flight. */
const reusable = (stored: Stored, now: number) =>
  Date.parse(stored.expires_at) <= now || (stored.state === 'in_progress' && Date.parse(stored.created_at) < now - ABANDONED_AFTER_MS)

/** Writes the key with its answer, or replaces the reusable row created at `replaces`; 409 when another request holds it. */
async function claimWithAnswer(executor: Executor, row: Database['idempotency_keys'], replaces: string): Promise<void> {
  if (replaces === '') {
    // The usual case, a key never seen: a plain insert (an upsert costs SQLite twice as much).
    try {
      await insertRow(executor, 'idempotency_keys', row)
      return
    } catch (error) {
      if (isUniqueViolation(error)) throw inProgress() // another instance claimed it since we looked
      throw error
    }
  }
  const { client_id, key, request_hash, state, status, body, headers, created_at, expires_at } = row
  const [written] = await claimKey(executor, client_id, key, request_hash, state, status, body, headers, created_at, expires_at, replaces)
  if (!written) throw inProgress()
}

const storedKey = precompiled((db, clientId: string, key: string) =>
  db.selectFrom('idempotency_keys').selectAll().where('client_id', '=', clientId).where('key', '=', key))

/** Takes over the row created at `replaces` (or inserts the key if it is gone); returns the key when it was written. */
const claimKey = precompiled((db, client_id: string, key: string, request_hash: string, state: string, status: number | null,
  body: string | null, headers: string | null, created_at: string, expires_at: string, replaces: string) =>
  db.insertInto('idempotency_keys').values({ client_id, key, request_hash, state, status, body, headers, created_at, expires_at })
    .onConflict((oc) => oc.columns(['client_id', 'key'])
      .doUpdateSet({ request_hash, state, status, body, headers, created_at, expires_at })
      .where('idempotency_keys.created_at', '=', replaces))
    .returning('key'))

async function storeAnswer(executor: Executor, clientId: string, key: string, status: number, body: string, headers: string): Promise<void> {
  await executor.updateTable('idempotency_keys').set({ state: 'done', status, body, headers })
    .where('client_id', '=', clientId).where('key', '=', key).execute()
}

/** The stored answer, through the context so the headers set earlier (request id, rate limit) come along. */
function answerFromStore(c: Context<AppEnv>, stored: Pick<Stored, 'request_hash' | 'state'> & Partial<Stored>, requestHash: string): Response {
  if (stored.request_hash !== requestHash) {
    throw new AppError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request body.')
  }
  if (stored.state !== 'done') throw inProgress()
  const headers: Record<string, string> = { ...JSON.parse(stored.headers ?? '{}'), 'Idempotent-Replayed': 'true' }
  return c.body(stored.body ?? '', (stored.status ?? 200) as ContentfulStatusCode, headers)
}

const inProgress = () => new AppError('idempotency_in_progress', 'A request with this Idempotency-Key is still being processed; retry shortly.', {}, { 'Retry-After': '1' })

async function release(db: Db, clientId: string, key: string): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('client_id', '=', clientId).where('key', '=', key).where('state', '=', 'in_progress').execute()
}

/** Forgets keys past their 24 h; run periodically so the table does not grow without bound. */
export async function purgeExpiredKeys(db: Db, clock: Clock): Promise<void> {
  await db.deleteFrom('idempotency_keys').where('expires_at', '<', iso(clock.now())).execute()
}
