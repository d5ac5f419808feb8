import type { AttemptRecord, DeliveryQueue, PendingDelivery } from './delivery-queue.js'
import { sendWebhook, type AgentPool, type SendResult } from './http-sender.js'
import { nextAttemptAt, shouldDisable } from './retry-policy.js'
import { signatureHeaders } from './signing.js'
import type { WebhookKeyRing } from './signing-keys.js'

export interface DispatcherLogger {
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

/** What one attempt needs: the dispatcher's settings, its agents and its shutdown signal. */
export type AttemptDeps = {
  queue: DeliveryQueue
  allowPrivate: boolean
  retrySchedule: readonly number[]
  timeoutMs: number
  agentFor: AgentPool['agentFor']
  /** Aborted when the dispatcher stops past its grace period. */
  signal: AbortSignal
  clock: () => number
  random: () => number
  logger: DispatcherLogger
  /** The service's Ed25519 keys, for endpoints whose scheme is `v1a`. */
  webhookKeys?: Pick<WebhookKeyRing, 'signatures'> | undefined
}

/** Storage hiccups: retry recording a little, then leave the row to its lease (re-sent later). */
const RECORD_RETRY_DELAYS_MS = [100, 1_000]

/**
 * One attempt: sign → send → decide what next → record. Null when the send was aborted by a
 * stop: the outcome is unknown, so the row is left to its lease.
 */
export async function attemptDelivery(row: PendingDelivery, deps: AttemptDeps): Promise<AttemptRecord | null> {
  const attemptedAtMs = deps.clock()
  const result = await send(row, attemptedAtMs, deps)
  if (result.error === 'aborted') return null
  const record = decide(row, attemptedAtMs, result, deps)
  if (!record.success) logFailure(record, deps.logger)
  await recordWithRetry(record, deps)
  return record
}

/** An operator sees each failed attempt and what comes next; never the URL, whose query may carry a receiver's token. */
function logFailure(record: AttemptRecord, logger: DispatcherLogger): void {
  const { deliveryId, endpointId, eventId, attempt, statusCode, error, nextAttemptAtMs, disable } = record
  const next = nextAttemptAtMs === null ? null : new Date(nextAttemptAtMs).toISOString()
  logger.warn(
    { deliveryId, endpointId, eventId, attempt, status: statusCode, error, nextAttemptAt: next, endpointDisabled: disable !== null },
    next ? 'webhook dispatcher: attempt failed; retrying later' : 'webhook dispatcher: attempt failed; no more retries',
  )
}

async function send(
  row: PendingDelivery,
  attemptedAtMs: number,
  { allowPrivate, timeoutMs, agentFor, signal, logger, webhookKeys }: AttemptDeps,
): Promise<SendResult> {
  let headers: Record<string, string>
  try {
    // Fresh timestamp per attempt: receivers reject signatures older than 5 minutes.
    const timestampSec = Math.floor(attemptedAtMs / 1000)
    headers = { ...signatureHeaders({ id: row.eventId, timestampSec, body: row.body, secrets: row.secrets }) }
    if (row.signatureScheme === 'v1a') {
      if (!webhookKeys) throw new Error('no webhook signing keys for a v1a endpoint')
      // Standard Webhooks, asymmetric: the same signed content, `v1a,` signatures only (no shared secret).
      headers['webhook-signature'] = (await webhookKeys.signatures(`${row.eventId}.${timestampSec}.${row.body}`)).join(' ')
    }
  } catch (err) {
    logger.error({ err, deliveryId: row.id, endpointId: row.endpointId }, 'webhook dispatcher: cannot sign delivery')
    return { status: null, error: 'internal: cannot sign', durationMs: 0, retryAfterMs: null, success: false }
  }
  return sendWebhook({
    url: row.url,
    headers,
    body: row.body,
    ...(row.contentType ? { contentType: row.contentType } : {}),
    timeoutMs,
    allowPrivate,
    agentFactory: agentFor,
    signal,
  })
}

function decide(
  row: PendingDelivery,
  attemptedAtMs: number,
  result: SendResult,
  { clock, retrySchedule, random }: AttemptDeps,
): AttemptRecord {
  const nowMs = clock()
  const disable = result.success
    ? null
    : shouldDisable({ firstFailureAtMs: row.endpointFailingSinceMs ?? attemptedAtMs, nowMs, status: result.status })
  const nextAttemptAtMs =
    result.success || disable
      ? null
      : nextAttemptAt(row.attempt, nowMs, { schedule: retrySchedule, retryAfterMs: result.retryAfterMs, random })
  return {
    deliveryId: row.id,
    endpointId: row.endpointId,
    eventId: row.eventId,
    attempt: row.attempt,
    attemptedAtMs,
    statusCode: result.status,
    error: result.error,
    durationMs: result.durationMs,
    success: result.success,
    nextAttemptAtMs,
    disable,
  }
}

async function recordWithRetry(record: AttemptRecord, { queue, logger }: AttemptDeps): Promise<void> {
  for (let tries = 0; ; tries++) {
    try {
      return await queue.recordAttempt(record)
    } catch (err) {
      const delay = RECORD_RETRY_DELAYS_MS[tries]
      if (delay === undefined) {
        logger.error(
          { err, deliveryId: record.deliveryId },
          'webhook dispatcher: recording an attempt failed; the delivery will be retried when its lease expires',
        )
        return
      }
      logger.warn({ err, deliveryId: record.deliveryId }, 'webhook dispatcher: recording an attempt failed; retrying')
      await new Promise((resolve) => setTimeout(resolve, delay))
    }
  }
}
