/**
 * How `onReadings` tells the broker what went wrong, and so whether the publish is acknowledged.
 *
 * - `PayloadRefusedError` (or any error with `refused: true`) is a bad payload: its message is
 *   published as the reason on the tote's errors topic and a QoS 1 publish is still acknowledged
 *   — re-sending the same bytes would fail the same way. The `code` member, when it is a
 *   snake_case string (as the codes of `parseReadings` are), becomes the `error` member of that JSON.
 * - Any other rejection means the readings could not be stored: no PUBACK, the connection is
 *   closed, and the tote re-sends them when it reconnects (MQTT 3.1.1 §4.4). That is the default
 *   so that no failure, foreseen or not, acknowledges a reading that was not stored.
 *   `IngestUnavailableError` says so explicitly.
 */
export class PayloadRefusedError extends Error {
  readonly refused = true
  constructor(
    readonly code: string,
    reason: string,
  ) {
    super(reason)
  }
}

export class IngestUnavailableError extends Error {}

export function isRefusal(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { refused?: unknown }).refused === true
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
