/**
 * How `onReadings` tells the broker what went wrong, and so whether the publish is acknowledged.
 *
 * - Any rejection is, by default, a refused payload: its message is published as the reason on
 *   the tote's errors topic and a QoS 1 publish is still acknowledged — re-sending the same bytes
 *   would fail the same way. The `code` member, when it is a snake_case string (as the codes of
 *   `parseReadings` are), becomes the `error` member of that JSON.
 * - `IngestUnavailableError` (or any error with `retriable: true`) means the readings could not be
 *   stored right now: no PUBACK, the connection is closed, and the tote re-sends them when it
 *   reconnects (MQTT 3.1.1 §4.4). Storage failures must use it, or acknowledged readings are lost.
 */
export class IngestUnavailableError extends Error {
  readonly retriable = true
}

export function isRetriable(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { retriable?: unknown }).retriable === true
}

/** The `{error, reason, at}` JSON for a refused payload. */
export function rejectionOf(error: unknown, nowMs: number): { error: string; reason: string; at: string } {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined
  return {
    error: typeof code === 'string' && /^[a-z][a-z0-9_]*$/.test(code) ? code : 'rejected',
    reason: error instanceof Error ? error.message : String(error),
    at: new Date(nowMs).toISOString(),
  }
}
