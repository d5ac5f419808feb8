import type { Executor } from './schema.js'

/**
 * Called by a write inside its own transaction, once the change is written, with what the write
 * answers: the answer kept for the request's Idempotency-Key then commits with the change it
 * describes, so no crash can keep one without the other. Undefined when nothing is to be kept.
 */
export type RecordAnswer<T> = (trx: Executor, answer: T) => Promise<void>
