import { z } from 'zod'

/** A duration such as `500ms`, `5s`, `5m`, `2h`, parsed to milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim())
  if (!match) throw new Error(`"${text}" is not a duration like 500ms, 5s, 5m, 2h or 1d`)
  const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'ms']
  return Math.round(Number(match[1]) * unitMs)
}

const port = z.coerce.number().int().min(0).max(65_535)
const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')

/** Every environment variable the service reads, with its default. Parsed once at start-up. */
export const configSchema = z.object({
  /** HTTP API port; 0 picks a free one (tests). */
  PORT: port.default(8080),
  /** Interface every listener binds to. */
  HOST: z.string().default('0.0.0.0'),
  /** Embedded MQTT broker, plain TCP. */
  MQTT_PORT: port.default(1883),
  /** Embedded MQTT broker over WebSocket (path /mqtt); `off` disables it. */
  MQTT_WS_PORT: z.union([z.literal('off'), port]).default(8083),
  /** Where the embedded SQLite stores live. */
  DATA_DIR: z.string().default('./data'),
  /** postgres://… switches the entity store from SQLite to PostgreSQL. */
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres://').optional(),
  /** QuestDB client config string (e.g. `http::addr=host:9000;`) switches the time series to QuestDB. */
  QUESTDB_CONFIG: z.string().regex(/^(http|https|tcp|tcps)::/, 'must be a QuestDB client config string like http::addr=host:9000;').optional(),
  /** Public base URL of the service: the token issuer; `aud` is ISSUER + "/v1". Defaults to http://localhost:PORT. */
  ISSUER: z.url().optional(),
  /** Access-token lifetime in seconds (SPEC §6: 15 min). */
  TOKEN_TTL_S: z.coerce.number().int().min(10).max(86_400).default(900),
  /** Per-client token bucket: sustained requests per second. */
  RATE_LIMIT_RPS: z.coerce.number().positive().default(50),
  /** Per-client token bucket: burst size. */
  RATE_LIMIT_BURST: z.coerce.number().int().positive().default(100),
  /** Pins the admin client's credentials (every scope, no tenant) instead of generating them on first start. */
  ADMIN_CLIENT_ID: z.string().min(3).max(100).optional(),
  ADMIN_CLIENT_SECRET: z.string().min(16, 'must be at least 16 characters').max(200).optional(),
  /** Development and tests: allow plain-http and private webhook targets. */
  WEBHOOK_ALLOW_PRIVATE: flag.default(false),
  /** Webhook retry delays, e.g. `1s,2s,5s`; default is SPEC §7's schedule. */
  WEBHOOK_RETRY_SCHEDULE: z.string().refine((text) => {
    try {
      return text.split(',').every((d) => parseDuration(d) > 0)
    } catch {
      return false
    }
  }, 'must be comma-separated durations such as 1s,2s,5s').optional(),
  /** Event-time reorder window for telemetry, seconds (SPEC §5). */
  REORDER_WINDOW_S: z.coerce.number().min(0).max(3_600).default(30),
  /**
   * scrypt cost of password hashes as log2(N), with r = 8 and p = 3 (see src/auth/passwords.ts):
   * 15 (32 MiB, OWASP's equivalent setting) by default; tests lower it to stay fast.
   */
  PASSWORD_SCRYPT_LOG2_N: z.coerce.number().int().min(10).max(20).default(15),
  /** pino level. */
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
})
  .refine((c) => (c.ADMIN_CLIENT_ID === undefined) === (c.ADMIN_CLIENT_SECRET === undefined), {
    message: 'set both ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or neither',
    path: ['ADMIN_CLIENT_SECRET'],
  })

export type Config = z.infer<typeof configSchema>

export class ConfigError extends Error {}

/** Parses the environment; the error message is one line naming the offending variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''))
  const result = configSchema.safeParse(present)
  if (result.success) return result.data
  const issue = result.error.issues[0]!
  const name = String(issue.path[0] ?? 'environment')
  throw new ConfigError(`invalid configuration: ${name}=${JSON.stringify(env[name] ?? '')}: ${issue.message}`)
}

export function issuerOf(config: Pick<Config, 'ISSUER' | 'PORT'>): string {
  return (config.ISSUER ?? `http://localhost:${config.PORT}`).replace(/\/$/, '')
}
