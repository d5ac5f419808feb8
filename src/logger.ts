import pino, { type DestinationStream, type Logger } from 'pino'
import pretty from 'pino-pretty'

export type LogFormat = 'json' | 'pretty'

/**
 * Structured logs: JSON lines for machines (a file, a pipe, a log collector), or the same
 * records rendered for a person when stdout is a terminal. Credentials and patient fields are
 * redacted wherever they appear, as a second line of defence: the code never logs request
 * bodies in the first place.
 */
export function createLogger(level: string, format: LogFormat = 'json'): Logger {
  const options = loggerOptions(level)
  if (format === 'json') return pino(options)
  // In-process and synchronous (no worker thread): a line is on the terminal before the next
  // statement runs, as with JSON, and nothing is lost when the process exits.
  const stream: DestinationStream = pretty({ sync: true, colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' })
  return pino(options, stream)
}

/** The service's logger options (level, base fields, redaction), for createLogger and for tests that capture its lines. */
export function loggerOptions(level: string) {
  return {
    level,
    base: { service: 'rxtrace' },
    redact: {
      paths: [
        '*.authorization',
        '*.password',
        '*.client_secret',
        '*.secret',
        '*.access_token',
        '*.token',
        '*.patient_id',
        '*.signature',
        '*.evidence',
        'headers',
      ],
      censor: '[redacted]',
    },
  }
}

/** JSON unless stdout is a terminal; LOG_FORMAT overrides. */
export function logFormatFor(setting: 'auto' | LogFormat, stdoutIsTty: boolean): LogFormat {
  if (setting !== 'auto') return setting
  return stdoutIsTty ? 'pretty' : 'json'
}
