import type { QueuedAction, Sender, SendOutcome } from './offline-queue.js'

/** The part of `createRxtraceClient(…)` this needs (typed loosely so this file compiles without the DOM types the SDK uses). */
export interface PostingClient {
  api: { POST(path: never, init: never): Promise<{ error?: unknown; response: { ok: boolean; status: number } }> }
}

/**
 * Sends queued actions through the SDK: `POST /v1/deliveries/{id}/{action}` with the action's
 * `occurred_at` and its id as the Idempotency-Key.
 */
export function apiSender(rx: PostingClient): Sender {
  return async (queued: QueuedAction): Promise<SendOutcome> => {
    const post = rx.api.POST as unknown as (
      path: string,
      init: unknown,
    ) => Promise<{ error?: unknown; response: { ok: boolean; status: number } }>
    const { error, response } = await post(`/v1/deliveries/{id}/${queued.action}`, {
      params: { path: { id: queued.delivery_id }, header: { 'idempotency-key': queued.id } },
      headers: { 'idempotency-key': queued.id },
      body: { ...queued.body, occurred_at: queued.occurred_at },
    })
    if (response.ok) return { kind: 'done' }
    // 401: the token source renews it; 408/429/5xx and a key still in progress (409 idempotency_in_progress): later.
    const code = (error as { code?: string } | undefined)?.code
    if (
      response.status === 401 ||
      response.status === 408 ||
      response.status === 429 ||
      response.status >= 500 ||
      code === 'idempotency_in_progress'
    ) {
      return { kind: 'retry', reason: `${response.status} ${code ?? ''}`.trim() }
    }
    return { kind: 'rejected', status: response.status, problem: error }
  }
}
