import type { Logger } from 'pino'
import type { Principal } from '../auth/scopes.js'
import type { IdempotentRequest } from './middleware/idempotency.js'

/** Values every request carries through the middleware chain; typed once. */
export type AppEnv = {
  Variables: {
    requestId: string
    /** The request's logger: a pino child with its request_id, made on first use. */
    log: () => Logger
    /** Set by `authenticate` on /v1 routes. */
    principal: Principal
    /** Set by `idempotency` on a POST that sent an Idempotency-Key. */
    idempotency?: IdempotentRequest
  }
}
