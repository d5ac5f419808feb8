import type { Logger } from 'pino'
import type { Clock } from '../clock.js'
import type { Metrics } from '../metrics.js'
import type { Dialect } from '../store/database.js'
import type { Db } from '../store/schema.js'
import type { Outbox } from '../events/outbox.js'
import type { SecretBox } from '../store/secret-box.js'

/** What the application services need from the outside world; built once by the composition root. */
export type ServiceDeps = {
  db: Db
  dialect: Dialect
  clock: Clock
  outbox: Outbox
  logger: Logger
  metrics: Metrics
  /** Seals the secrets kept to use again (webhook and writeback secrets) under SECRETS_KEY. */
  secrets: SecretBox
}
