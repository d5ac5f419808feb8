import type { Logger } from 'pino'
import type { Principal } from '../auth/scopes.js'

/** Values every request carries through the middleware chain; typed once. */
export type AppEnv = {
  Variables: {
    requestId: string
    log: Logger
    /** Set by `authenticate` on /v1 routes. */
    principal: Principal
  }
}
