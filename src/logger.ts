import pino, { type Logger } from 'pino'

/**
 * Structured JSON logs. Credentials and patient fields are redacted wherever they appear, as a
 * second line of defence: the code never logs request bodies in the first place.
 */
export function createLogger(level: string): Logger {
  return pino({
    level,
    base: { service: 'rxtrace' },
    redact: {
      paths: ['*.authorization', '*.password', '*.client_secret', '*.secret', '*.access_token', '*.token', '*.patient_id', '*.signature', '*.evidence', 'headers'],
      censor: '[redacted]',
    },
  })
}
