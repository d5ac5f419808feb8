import type { Logger } from 'pino'
import type { Principal } from '../auth/scopes.js'
import type { StoredSignature } from '../domain/custody-event.js'
import type { Executor } from '../store/schema.js'

/** Values every request carries through the middleware chain; typed once. */
export type AppEnv = {
  Variables: {
    requestId: string
    /** The request's logger: a pino child with its request_id, made on first use. */
    log: () => Logger
    /** Set by `authenticate` on /v1 routes. */
    principal: Principal
    /** Set by the body-guard on a route that reads its own body (an image upload): nothing before the handler reads it. */
    streamedBody?: true
    /** Set by `idempotency` on a POST that sent an Idempotency-Key. */
    idempotency?: IdempotentRequest
    /** Set by `auditTrail` on a state-changing request: writes its audit record in the transaction of its change. */
    auditInTransaction?: (trx: Executor, status: number, answer: unknown, signature?: StoredSignature | null) => Promise<void>
  }
}

/**
 * The key of the request being handled. The handler's service calls `complete` inside the
 * transaction of its change, so the change and the stored answer commit together. `value` must
 * be what the handler then answers with `c.json(value, status)`: the replay is its JSON text,
 * byte for byte, except the `secrets` (JSON Pointers), which are stored and replayed as null.
 */
type IdempotentRequest = {
  complete(trx: Executor, status: number, value: unknown, secrets?: readonly string[]): Promise<void>
}
