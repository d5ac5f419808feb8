import type { Principal } from '../../auth/scopes.js'
import type { Context, MiddlewareHandler } from 'hono'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import type { Clock } from '../../clock.js'
import { iso } from '../../clock.js'
import { AppError } from '../../errors.js'
import { sha256Hex } from '../../hashing.js'
import type { StoredSignature } from '../../domain/custody-event.js'
import type { RecordAnswer } from '../../store/record-answer.js'
import { isUniqueViolation } from '../../store/errors.js'
import { insertRow, precompiled } from '../../store/precompiled.js'
import type { Database, Db, Executor } from '../../store/schema.js'
import type { AppEnv } from '../env.js'

const KEY_TTL_MS = 24 * 3_600_000 // docs/api.md, Idempotency: keys are kept 24 h
// Versions before answers committed with their change wrote an "in progress" row first; one
// still in progress after this long died with its process, and its key may be used again.
const ABANDONED_AFTER_MS = 60_000
const printableAscii = /^[\x20-\x7e]{1,255}$/
/** Lists, as JSON Pointers (RFC 6901), the fields of a replayed answer that were shown once and are now null. */
const REDACTED_HEADER = 'Idempotent-Replay-Redacted'

type Stored = {
  request_hash: string
  state: string
  status: number | null
  body: string | null
  headers: string | null
  created_at: string
  expires_at: string
}

/**
 * IETF Idempotency-Key semantics as Stripe implements them: the first request with a key runs,
 * a retry with the same body gets the stored response byte for byte, a different body is 422,
 * a retry while the first still runs is 409. Keys are scoped to the client (and to the person, for a person's token: see keyOwner). Only answers that
 * took effect (2xx) are stored: an error answer changed nothing, so the caller may retry, or
 * correct the body and send it again under the same key (Stripe does not save validation
 * failures either).
 *
 * Nothing is written before the handler runs: its service writes the key with its answer in
 * the transaction of its change (`IdempotentRequest.complete` in `../env.ts`, reached through
 * `answerInTransaction`). A crash before that commit leaves neither change nor key, so the
 * retry runs afresh; a crash after it leaves both, so the retry gets the stored answer. While
 * the request runs this process remembers its key, so a concurrent retry gets 409; a retry
 * racing it on another instance conflicts on the key's primary key inside its own transaction,
 * gets 409 and leaves nothing behind.
 */
export function idempotency({
  db,
  clock,
  requiredOn,
}: {
  db: Db
  clock: Clock
  requiredOn: (path: string) => boolean
}): MiddlewareHandler<AppEnv> {
  /** `client_id \n key` → request hash, for the keys of requests running in this process. */
  const running = new Map<string, string>()

  return async function idempotencyMiddleware(c, next) {
    // An image upload is idempotent by its content (the same bytes answer the same attachment); its
    // body is the route's to read, at most 5 MiB, and is not read here to be hashed.
    if (c.req.method !== 'POST' || c.get('streamedBody')) return next()
    const key = c.req.header('idempotency-key')
    if (key === undefined) {
      if (requiredOn(c.req.path))
        throw new AppError('idempotency_key_missing', 'This request needs an Idempotency-Key header (1–255 printable ASCII characters).')
      return next()
    }
    if (!printableAscii.test(key)) {
      throw new AppError('validation_failed', 'Idempotency-Key must be 1–255 printable ASCII characters.', {
        errors: [{ pointer: '/headers/idempotency-key', message: 'must be 1–255 printable ASCII characters' }],
      })
    }
    const clientId = keyOwner(c.get('principal'))
    const requestHash = sha256Hex(`${c.req.method} ${c.req.path}\n${withoutSecrets(await c.req.text())}`)
    const now = clock.now()
    const slot = `${clientId}\n${key}`
    const runningHash = running.get(slot)
    if (runningHash !== undefined) return answerFromStore(c, { request_hash: runningHash, state: 'in_progress' }, requestHash)
    running.set(slot, requestHash)
    try {
      const [stored] = await storedKey(db, clientId, key)
      if (stored && !reusable(stored, now)) return answerFromStore(c, stored, requestHash)
      // The row this request may replace (expired or abandoned); a newer one means another instance won.
      const replaces = stored?.created_at ?? ''
      const keep = (executor: Executor, status: number, body: string, headers: string) =>
        claimWithAnswer(
          executor,
          {
            client_id: clientId,
            key,
            request_hash: requestHash,
            state: 'done',
            status,
            body,
            headers,
            created_at: iso(now),
            expires_at: iso(now + KEY_TTL_MS),
          },
          replaces,
        )
      let recorded = false
      c.set('idempotency', {
        async complete(trx, status, value, secrets = []) {
          const answer = storedForm(value, secrets)
          await keep(trx, status, answer.body, answer.headers)
          recorded = true
        },
      })
      await next()
      if (c.res.status >= 400 || recorded) return
      // A route whose service does not record its answer in its transaction: keep the answer now,
      // after the fact. A crash in between would let the retry run the request again.
      c.get('log')().warn({ path: c.req.path }, 'idempotent answer stored after its change, not with it')
      await keep(
        db,
        c.res.status,
        await c.res.clone().text(),
        JSON.stringify({ 'content-type': c.res.headers.get('content-type') ?? 'application/json' }),
      )
    } finally {
      running.delete(slot)
    }
  }
}

/**
 * The body as its key remembers it: a signing password (`signature.password`) replaced by a
 * marker. An unsalted SHA-256 of a body whose other members are known would let anyone holding
 * the table test guesses of the password offline; the key's record must not carry it in any form.
 * A retry under the same key is then the same request whichever password it sends: it is
 * answered the first answer, and signs nothing again.
 */
function withoutSecrets(text: string): string {
  return withoutDeliveryPin(withoutSigningPassword(text))
}

function withoutSigningPassword(text: string): string {
  if (!text.includes('"password"')) return text
  try {
    const body = JSON.parse(text) as { signature?: { password?: unknown } }
    if (!body?.signature || typeof body.signature !== 'object' || !('password' in body.signature)) return text
    return JSON.stringify({ ...body, signature: { ...body.signature, password: '(checked when signing, not kept)' } })
  } catch {
    return text
  }
}

/**
 * The same for a delivery PIN (`proof.pin`, docs/api.md, Proof of delivery): six digits are a
 * million guesses, which a hash of the body would give away in a second.
 */
function withoutDeliveryPin(text: string): string {
  if (!text.includes('"pin"')) return text
  try {
    const body = JSON.parse(text) as { proof?: { pin?: unknown } }
    if (!body?.proof || typeof body.proof !== 'object' || !('pin' in body.proof)) return text
    return JSON.stringify({ ...body, proof: { ...body.proof, pin: '(checked when delivering, not kept)' } })
  } catch {
    return text
  }
}

/**
 * What a route hands its service so that what `c.json(answer, status)` leaves behind commits with
 * the change: the answer kept for the request's Idempotency-Key (if it sent one) and the
 * request's audit record. Undefined only when neither applies.
 */
export function answerInTransaction<T>(
  c: Context<AppEnv>,
  status: number,
  secrets: readonly string[] = [],
  /** The e-signature the answer carries that enters the audit chain as its own record (docs/part11.md). */
  signatureOf?: (answer: T) => StoredSignature | null,
): RecordAnswer<T> | undefined {
  const request = c.get('idempotency')
  const audit = c.get('auditInTransaction')
  if (!request && !audit) return undefined
  return async (trx, answer) => {
    if (request) await request.complete(trx, status, answer, secrets)
    // Last: on PostgreSQL it takes the audit chain's lock, held to the commit.
    if (audit) await audit(trx, status, answer, signatureOf?.(answer))
  }
}

// What `c.json()` answers with; a replay sends the same.
const JSON_HEADERS = JSON.stringify({ 'content-type': 'application/json' })

/**
 * The answer as kept: its JSON text, with each secret set to null. A secret is shown once, in
 * the first answer; keeping it here would keep it in clear for the key's 24 h.
 */
function storedForm(value: unknown, secrets: readonly string[]): { body: string; headers: string } {
  if (secrets.length === 0) return { body: JSON.stringify(value), headers: JSON_HEADERS }
  const copy = structuredClone(value) as Record<string, unknown>
  for (const pointer of secrets) {
    // RFC 6901: "/a/b" names member b of member a (our names need no ~ escapes).
    const names = pointer.split('/').slice(1)
    const last = names.pop()!
    let parent: unknown = copy
    for (const name of names) parent = parent && typeof parent === 'object' ? (parent as Record<string, unknown>)[name] : undefined
    if (parent && typeof parent === 'object' && last in parent) (parent as Record<string, unknown>)[last] = null
  }
  return {
    body: JSON.stringify(copy),
    headers: JSON.stringify({ 'content-type': 'application/json', [REDACTED_HEADER]: secrets.join(', ') }),
  }
}

/**
 * Whose keys these are: the client's, and for a person signed in through an app, that person's
 * within it. Pharmacists of two pharmacies share a first-party app; scoped by the app alone, one
 * would be replayed the other's stored answer (another pharmacy's prescription) for the same key.
 * Stored in the `client_id` column; a client's own tokens (`sub` is the client) keep the plain id.
 */
function keyOwner(principal: Principal): string {
  return principal.sub === principal.clientId ? principal.clientId : `${principal.clientId} ${principal.sub}`
}

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
  db.selectFrom('idempotency_keys').selectAll().where('client_id', '=', clientId).where('key', '=', key),
)

/** Takes over the row created at `replaces` (or inserts the key if it is gone); returns the key when it was written. */
const claimKey = precompiled(
  (
    db,
    client_id: string,
    key: string,
    request_hash: string,
    state: string,
    status: number | null,
    body: string | null,
    headers: string | null,
    created_at: string,
    expires_at: string,
    replaces: string,
  ) =>
    db
      .insertInto('idempotency_keys')
      .values({ client_id, key, request_hash, state, status, body, headers, created_at, expires_at })
      .onConflict((oc) =>
        oc
          .columns(['client_id', 'key'])
          .doUpdateSet({ request_hash, state, status, body, headers, created_at, expires_at })
          .where('idempotency_keys.created_at', '=', replaces),
      )
      .returning('key'),
)

/** The stored answer, through the context so the headers set earlier (request id, rate limit) come along. */
function answerFromStore(
  c: Context<AppEnv>,
  stored: Pick<Stored, 'request_hash' | 'state'> & Partial<Stored>,
  requestHash: string,
): Response {
  if (stored.request_hash !== requestHash) {
    throw new AppError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request body.')
  }
  if (stored.state !== 'done') throw inProgress()
  const headers: Record<string, string> = { ...JSON.parse(stored.headers ?? '{}'), 'Idempotent-Replayed': 'true' }
  return c.body(stored.body ?? '', (stored.status ?? 200) as ContentfulStatusCode, headers)
}

const inProgress = () =>
  new AppError(
    'idempotency_in_progress',
    'A request with this Idempotency-Key is still being processed; retry shortly.',
    {},
    { 'Retry-After': '1' },
  )
