/** One error type for everything the API answers on purpose; `onError` turns it into problem+json (RFC 9457). */
export type ErrorCode =
  | 'invalid_json'
  | 'validation_failed'
  | 'idempotency_key_missing'
  | 'idempotency_key_reused'
  | 'idempotency_in_progress'
  | 'unauthorized'
  | 'signature_failed'
  | 'insufficient_user_authentication'
  | 'insufficient_scope'
  | 'signature_required_person'
  | 'not_found'
  | 'method_not_allowed'
  | 'invalid_transition'
  | 'cold_chain_hold'
  | 'not_released'
  | 'stability_exhausted'
  | 'sensor_calibration_due'
  | 'not_on_delivery'
  | 'pod_requirements_unmet'
  | 'pin_locked'
  | 'image_refused'
  | 'content_type_mismatch'
  | 'conflict'
  | 'tracking_closed'
  | 'payload_too_large'
  | 'body_too_slow'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'limit_exceeded'
  | 'internal'
  | 'not_ready'

const statusOf: Record<ErrorCode, number> = {
  invalid_json: 400,
  validation_failed: 422,
  idempotency_key_missing: 400,
  idempotency_key_reused: 422,
  idempotency_in_progress: 409,
  unauthorized: 401,
  signature_failed: 401,
  insufficient_user_authentication: 401,
  insufficient_scope: 403,
  signature_required_person: 403,
  not_found: 404,
  method_not_allowed: 405,
  invalid_transition: 409,
  cold_chain_hold: 409,
  not_released: 409,
  stability_exhausted: 409,
  sensor_calibration_due: 409,
  not_on_delivery: 409,
  pod_requirements_unmet: 422,
  pin_locked: 409,
  image_refused: 422,
  content_type_mismatch: 422,
  conflict: 409,
  tracking_closed: 409,
  payload_too_large: 413,
  body_too_slow: 408,
  unsupported_media_type: 415,
  rate_limited: 429,
  limit_exceeded: 409,
  internal: 500,
  not_ready: 503,
}

export type FieldError = { pointer: string; message: string }

export class AppError extends Error {
  readonly status: number
  constructor(
    readonly code: ErrorCode,
    detail: string,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(detail)
    this.status = statusOf[code]
  }
}

export const notFound = (what: string) => new AppError('not_found', `${what} not found`)
/**
 * At most this many field errors in one answer (docs/api.md, Errors): a body of many bad parts
 * (a statement of two million bad lines) would otherwise get an answer larger than itself.
 * `errors_omitted` counts the rest.
 */
export const MAX_FIELD_ERRORS = 100

/** 422 naming the first MAX_FIELD_ERRORS bad fields; `total` when the caller kept only some of them. */
export const validationFailed = (errors: FieldError[], detail = 'The request has invalid fields.', total = errors.length) => {
  const shown = errors.slice(0, MAX_FIELD_ERRORS)
  return new AppError('validation_failed', detail, {
    errors: shown,
    ...(total > shown.length ? { errors_omitted: total - shown.length } : {}),
  })
}
