import { z } from 'zod'
import { withoutPassword } from './startup-error.js'
import { parseKey } from './store/secrets-key.js'

/** A duration such as `500ms`, `5s`, `5m`, `2h`, parsed to milliseconds. */
export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(text.trim())
  if (!match) throw new Error(`"${text}" is not a duration like 500ms, 5s, 5m, 2h or 1d`)
  const unitMs = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'ms']
  return Math.round(Number(match[1]) * unitMs)
}

const port = z.coerce.number().int().min(0).max(65_535)
const flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1')
// A key-encryption key: what `openssl rand -base64 32` prints.
const KEY_TEXT = '32 random bytes in base64, e.g. from `openssl rand -base64 32`'
const secretsKey = z
  .string()
  .transform((text, ctx) => parseKey(text) ?? (ctx.addIssue({ code: 'custom', message: `must be ${KEY_TEXT}` }), z.NEVER))
const secretsKeys = z.string().transform((text, ctx) => {
  const keys = text.split(',').map(parseKey)
  if (keys.every((k) => k !== null)) return keys
  ctx.addIssue({ code: 'custom', message: `each comma-separated key must be ${KEY_TEXT}` })
  return z.NEVER
})

/** Every environment variable the service reads, with its default. Parsed once at start-up. */
export const configSchema = z
  .object({
    /** HTTP API port; 0 picks a free one (tests). */
    PORT: port.default(8080),
    /** Interface every listener binds to. */
    HOST: z.string().default('0.0.0.0'),
    /** Embedded MQTT broker, plain TCP. */
    MQTT_PORT: port.default(1883),
    /** Embedded MQTT broker over WebSocket (path /mqtt); `off` disables it. */
    MQTT_WS_PORT: z.union([z.literal('off'), port]).default(8083),
    /** Largest MQTT packet (remaining length, bytes); a larger one closes the connection as its header is read. */
    MQTT_MAX_PACKET_BYTES: z.coerce
      .number()
      .int()
      .min(1_024)
      .max(268_435_455)
      .default(256 * 1024),
    /** Seconds a new MQTT connection has to complete its CONNECT. */
    MQTT_CONNECT_TIMEOUT_S: z.coerce.number().positive().max(300).default(10),
    /** Client ids one tote may hold an MQTT session under at once (connected, or persistent and offline). */
    MQTT_MAX_SESSIONS_PER_TOTE: z.coerce.number().int().min(1).max(1_000).default(4),
    /** QoS 1 messages kept per persistent MQTT session until acknowledged; newer ones are dropped. */
    MQTT_MAX_QUEUED_PER_SESSION: z.coerce.number().int().min(1).max(100_000).default(100),
    /**
     * `mqtt://user:pass@host:1883` (or `mqtts://`): no embedded broker; each copy is an ingest worker on
     * this external broker (docs/deployment.md). The user needs the ingest role and, unless
     * `MQTT_PROVISIONING=off`, Mosquitto's dynamic-security admin role.
     */
    MQTT_URL: z
      .string()
      .regex(/^mqtts?:\/\/[^:@/]+:[^@/]+@[^/]+/, 'must look like mqtt://user:password@host:1883')
      .optional(),
    /**
     * With `MQTT_URL`: this copy's MQTT client id prefix, stable across restarts so the broker hands
     * back its persistent session (and the messages it had not acknowledged). Unique per copy.
     * Default: `rxtrace_` + host name + `_` + a hash of `DATA_DIR`.
     */
    MQTT_CLIENT_ID: z
      .string()
      .regex(/^[A-Za-z0-9_.]{1,60}$/, 'letters, digits, dot and underscore only, at most 60')
      .optional(),
    /** With `MQTT_URL`: connections (sessions on the shared subscription) each copy opens. */
    MQTT_INGEST_CONNECTIONS: z.coerce.number().int().min(1).max(64).default(2),
    /** With `MQTT_URL`: how long the broker keeps a copy's session (and its unacknowledged messages) while it is away. */
    MQTT_SESSION_EXPIRY_S: z.coerce
      .number()
      .int()
      .min(60)
      .max(4_294_967_295)
      .default(7 * 86_400),
    /**
     * With `MQTT_URL`: `dynsec` puts tote credentials into Mosquitto's dynamic-security plugin;
     * `off` leaves them to the operator (e.g. EMQX's HTTP authentication, docs/deployment.md).
     */
    MQTT_PROVISIONING: z.enum(['dynsec', 'off']).default('dynsec'),
    /** With `MQTT_URL`: the external broker as totes reach it (`mqtts://broker.example.com:8883`), told by GET /.well-known/rxtrace.json. */
    MQTT_PUBLIC_URL: z
      .string()
      .regex(/^(mqtts?|wss?):\/\/[^/@]+(\/.*)?$/, 'must look like mqtts://broker.example.com:8883, without credentials')
      .optional(),
    /** Where the embedded SQLite stores live. */
    DATA_DIR: z.string().default('./data'),
    /** postgres://… switches the entity store from SQLite to PostgreSQL. */
    DATABASE_URL: z
      .string()
      .regex(/^postgres(ql)?:\/\//, 'must start with postgres://')
      .optional(),
    /**
     * PostgreSQL: how long opening a connection (TCP, TLS, authentication), or waiting for a free
     * one in the pool, may take before the request gives up with 503 `not_ready`; also how long
     * the database may stay silent (nothing answers, not even a `select 1` on a new connection)
     * before the queries waiting on it give up (store/answer-watch.ts, docs/operations.md).
     */
    DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5_000),
    /**
     * PostgreSQL: the server cancels a statement running longer than this (`statement_timeout`),
     * and this process stops waiting for an answer 1 s later (a partition: the server cannot say).
     */
    DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(15_000),
    /** PostgreSQL: a session left idle inside a transaction this long is ended by the server, releasing its locks. */
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: z.coerce.number().int().min(100).max(3_600_000).default(60_000),
    /**
     * SQLite (no DATABASE_URL): the entity store's page cache, in MiB. It holds the pages used last
     * (indexes, rows, stored idempotent answers) and stays full once filled, so the process's
     * memory keeps up to this much more than at start; smaller costs each create more reads.
     */
    SQLITE_CACHE_MIB: z.coerce.number().int().min(2).max(4096).default(64),
    /** `/readyz` waits this long for each store's probe; one that has not answered counts as not ready. */
    READY_TIMEOUT_MS: z.coerce.number().int().min(50).max(10_000).default(800),
    /**
     * Free space `DATA_DIR` must keep (MiB) for `/readyz` to say ready while a SQLite store lives
     * there; below it the next writes may fail with a full disk.
     */
    DISK_FREE_MIN_MB: z.coerce.number().min(0).default(64),
    /** QuestDB client config string (e.g. `http::addr=host:9000;`) switches the time series to QuestDB. */
    QUESTDB_CONFIG: z
      .string()
      .regex(/^(http|https|tcp|tcps)::/, 'must be a QuestDB client config string like http::addr=host:9000;')
      .optional(),
    /** Public base URL of the service: the token issuer; `aud` is ISSUER + "/v1". Defaults to http://localhost:PORT. */
    ISSUER: z.url().optional(),
    /** Access-token lifetime in seconds (15 min by default). */
    TOKEN_TTL_S: z.coerce.number().int().min(10).max(86_400).default(900),
    /** Per-client token bucket: sustained requests per second. */
    RATE_LIMIT_RPS: z.coerce.number().positive().default(50),
    /** Per-client token bucket: burst size. */
    RATE_LIMIT_BURST: z.coerce.number().int().positive().default(100),
    /** Per-tenant token bucket shared by all clients of one pharmacy or fleet: sustained requests per second (4 clients' worth). */
    RATE_LIMIT_TENANT_RPS: z.coerce.number().positive().default(200),
    /** Per-tenant token bucket: burst size. */
    RATE_LIMIT_TENANT_BURST: z.coerce.number().int().positive().default(400),
    /** OAuth clients one pharmacy or fleet may have; one more is refused with 409 `limit_exceeded`. */
    TENANT_MAX_CLIENTS: z.coerce.number().int().min(1).default(50),
    /** Webhook endpoints one pharmacy or fleet (or the unrestricted admin) may register. */
    TENANT_MAX_WEBHOOKS: z.coerce.number().int().min(1).default(20),
    /** Totes one pharmacy or fleet may register (a large chain's fleet of totes, with room to spare). */
    TENANT_MAX_TOTES: z.coerce.number().int().min(1).default(10_000),
    /**
     * Days drivers' positions are kept after their delivery ends (DELIVERED, RETURNED, CANCELLED;
     * docs/fleet.md): long enough to settle a dispute about a delivery, not a record of where people were.
     */
    POSITION_RETENTION_DAYS: z.coerce.number().min(0).max(3_650).default(30),
    // A proof-of-delivery image must arrive within this many seconds once its turn to be read comes,
    // so a trickled body cannot hold one of the few upload slots for long (docs/api.md, Proof of delivery).
    UPLOAD_READ_TIMEOUT_S: z.coerce.number().int().min(1).max(600).default(60),
    /** `/oauth/*` requests per remote address: sustained per second (tokens live 15 min; clients rarely ask). */
    OAUTH_ADDRESS_RPS: z.coerce.number().positive().default(10),
    /** `/oauth/*` requests per remote address: burst size (a deployment's workers starting at once). */
    OAUTH_ADDRESS_BURST: z.coerce.number().int().positive().default(60),
    /** `/oauth/token` requests naming one client id, whoever sends them: sustained per second. */
    OAUTH_CLIENT_RPS: z.coerce.number().positive().default(2),
    /** `/oauth/token` requests naming one client id: burst size. */
    OAUTH_CLIENT_BURST: z.coerce.number().int().positive().default(30),
    /** Invalid bearer tokens (each costs a signature check) per remote address: sustained per second. */
    INVALID_TOKEN_RPS: z.coerce.number().positive().default(1),
    /** Invalid bearer tokens per remote address: burst size; once spent, that address's bearer requests get 429. */
    INVALID_TOKEN_BURST: z.coerce.number().int().positive().default(20),
    /** Patient tracking page (`/track`) requests per remote address: sustained per second (a carrier NAT shares one address). */
    TRACKING_ADDRESS_RPS: z.coerce.number().positive().default(1),
    /** Tracking page requests per remote address: burst size. */
    TRACKING_ADDRESS_BURST: z.coerce.number().int().positive().default(60),
    /** Tracking page requests per link, from anywhere: sustained per second (0.2: one every 5 s, a patient reloading now and then). */
    TRACKING_LINK_RPS: z.coerce.number().positive().default(0.2),
    /** Tracking page requests per link: burst size. */
    TRACKING_LINK_BURST: z.coerce.number().int().positive().default(20),
    /** Take the caller's address from the last X-Forwarded-For entry (set only behind a proxy that appends it); default: the socket's address. */
    TRUST_PROXY: flag.default(false),
    /** Pins the admin client's credentials (every scope, no tenant) instead of generating them on first start. */
    ADMIN_CLIENT_ID: z.string().min(3).max(100).optional(),
    ADMIN_CLIENT_SECRET: z.string().min(16, 'must be at least 16 characters').max(200).optional(),
    /**
     * Key-encryption key of the secrets the service keeps to use again (token signing keys, webhook
     * and writeback secrets): base64 of 32 random bytes. Required with `DATABASE_URL`, the same in
     * every copy. Unset, with no `SECRETS_KEY_FILE`, on SQLite: `DATA_DIR/secrets.key`, generated on
     * the first start (docs/operations.md, Rotating the key-encryption key).
     */
    SECRETS_KEY: secretsKey.optional(),
    /** With `SECRETS_KEY`: older (or, early in a rotation, newer) keys, comma-separated, that open secrets but never seal. */
    SECRETS_KEY_PREVIOUS: secretsKeys.optional(),
    /** Instead of `SECRETS_KEY`: a file of keys, one base64 key a line, the current first; `#` comments. */
    SECRETS_KEY_FILE: z.string().min(1).optional(),
    /** Development and tests: allow plain-http and private webhook targets. */
    WEBHOOK_ALLOW_PRIVATE: flag.default(false),
    /** Webhook retry delays, e.g. `1s,2s,5s`; default is the schedule in src/webhooks/README.md. */
    WEBHOOK_RETRY_SCHEDULE: z
      .string()
      .refine((text) => {
        try {
          return text.split(',').every((d) => parseDuration(d) > 0)
        } catch {
          return false
        }
      }, 'must be comma-separated durations such as 1s,2s,5s')
      .optional(),
    /** Live event streams (docs/api.md, Event streams): a `: heartbeat` comment on every open stream this often, seconds. */
    EVENT_STREAM_HEARTBEAT_S: z.coerce.number().min(0.01).max(300).default(15),
    /** Live event streams: how often the store is read for events committed by other copies of the service, ms. */
    EVENT_STREAM_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(500),
    /** Live event streams: bytes one stream may have waiting for a slow reader (KiB); past that the stream is ended. */
    EVENT_STREAM_BUFFER_KB: z.coerce.number().int().min(1).max(65_536).default(256),
    /** Live event streams one pharmacy or fleet (or the unrestricted clients together) may hold open at once. */
    EVENT_STREAM_MAX_PER_TENANT: z.coerce.number().int().min(1).max(100_000).default(100),
    /**
     * Days a delivery's record is kept after it ends, and with it the readings bound to it
     * (docs/operations.md, Retention): 2190 = 6 years. Audit and custody records are never
     * removed before this. Bounds: 1 day to 100 years.
     */
    RETENTION_RECORDS_DAYS: z.coerce.number().int().min(1).max(36_500).default(2_190),
    /** Days a reading bound to no delivery (an idle tote's) is kept. Bounds: 1 day to 100 years. */
    RETENTION_UNBOUND_DAYS: z.coerce.number().int().min(1).max(36_500).default(7),
    /** Days webhook delivery attempts (and finished webhook messages) are kept. Bounds: 1 to 3650. */
    RETENTION_ATTEMPTS_DAYS: z.coerce.number().int().min(1).max(3_650).default(30),
    /** Seconds between two expiry passes (docs/operations.md, Retention); 0 turns background expiry off. */
    RETENTION_INTERVAL_S: z.coerce.number().int().min(0).max(86_400).default(300),
    /** Readings one expiry batch removes at most: small, so a write never waits long behind it. */
    RETENTION_BATCH: z.coerce.number().int().min(100).max(100_000).default(1_000),
    /** Milliseconds an expiry pass rests between two batches, leaving the store to ingest. */
    RETENTION_PAUSE_MS: z.coerce.number().int().min(0).max(60_000).default(200),
    /** Event-time reorder window for telemetry, seconds (rules/README.md). */
    REORDER_WINDOW_S: z.coerce.number().min(0).max(3_600).default(30),
    /**
     * Milliseconds the first reading of an ingest group waits for others before their one write
     * (telemetry/group-commit.ts). Default: ingestGatherMs().
     */
    INGEST_GATHER_MS: z.coerce.number().int().min(0).max(100).optional(),
    /**
     * Crash tests only, never in production: a regular expression over request paths. A POST whose
     * path matches kills the process (SIGKILL) right after its handler has done its work and before
     * the answer leaves, the moment a real crash would lose the answer but not the change.
     */
    CRASH_AFTER_HANDLER: z
      .string()
      .refine((text) => {
        try {
          return Boolean(new RegExp(text))
        } catch {
          return false
        }
      }, 'must be a regular expression')
      .optional(),
    /**
     * scrypt cost of password hashes as log2(N), with r = 8 and p = 3 (see src/auth/passwords.ts):
     * 15 (32 MiB, OWASP's equivalent setting) by default; tests lower it to stay fast.
     */
    PASSWORD_SCRYPT_LOG2_N: z.coerce.number().int().min(10).max(20).default(15),
    /** pino level. */
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /** `json` (one JSON record a line), `pretty` (for a person), or `auto`: pretty when stdout is a terminal, JSON otherwise. */
    LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  })
  .superRefine((c, ctx) => {
    // Two listeners on one port: the second would fail as "already in use", naming only itself.
    const clash = portClash(c)
    if (clash)
      ctx.addIssue({
        code: 'custom',
        path: [clash.second],
        message: `the same port as ${clash.first}=${clash.port}; give each listener its own port`,
      })
  })
  // Readings a backdated dispatch claims must not be older than the records window while they are
  // still kept as an idle tote's: else a pass that read which deliveries to keep just before the
  // dispatch could remove, as past the records window, readings it had just given the delivery.
  .superRefine((c, ctx) => {
    if (c.RETENTION_RECORDS_DAYS < c.RETENTION_UNBOUND_DAYS)
      ctx.addIssue({
        code: 'custom',
        path: ['RETENTION_RECORDS_DAYS'],
        message: `${c.RETENTION_RECORDS_DAYS} day${c.RETENTION_RECORDS_DAYS === 1 ? '' : 's'} is shorter than RETENTION_UNBOUND_DAYS=${c.RETENTION_UNBOUND_DAYS}; a delivery’s readings are kept at least as long as an idle tote’s`,
      })
  })
  .refine((c) => (c.ADMIN_CLIENT_ID === undefined) === (c.ADMIN_CLIENT_SECRET === undefined), {
    message: 'set both ADMIN_CLIENT_ID and ADMIN_CLIENT_SECRET, or neither',
    path: ['ADMIN_CLIENT_SECRET'],
  })
  .refine((c) => !(c.SECRETS_KEY && c.SECRETS_KEY_FILE), {
    message: 'set SECRETS_KEY or SECRETS_KEY_FILE, not both',
    path: ['SECRETS_KEY_FILE'],
  })
  .refine((c) => !c.SECRETS_KEY_PREVIOUS || c.SECRETS_KEY, {
    message: 'needs SECRETS_KEY (with SECRETS_KEY_FILE, put the other keys on its later lines)',
    path: ['SECRETS_KEY_PREVIOUS'],
  })
  // Copies sharing a database must share the key: one generated per copy would not open the others' secrets.
  .refine((c) => !c.DATABASE_URL || c.SECRETS_KEY || c.SECRETS_KEY_FILE, {
    message:
      'required with DATABASE_URL (every copy needs the same key); generate one with `openssl rand -base64 32`, or set SECRETS_KEY_FILE',
    path: ['SECRETS_KEY'],
  })

export type Config = z.infer<typeof configSchema>

/** The first two listeners given one port (0, a free port each, never clashes); none with MQTT_URL, where no broker listens. */
function portClash(c: { PORT: number; MQTT_PORT: number; MQTT_WS_PORT: number | 'off'; MQTT_URL?: string | undefined }) {
  const listeners = [
    ['PORT', c.PORT],
    ...(c.MQTT_URL ? [] : [['MQTT_PORT', c.MQTT_PORT] as const]),
    ...(c.MQTT_URL || c.MQTT_WS_PORT === 'off' ? [] : [['MQTT_WS_PORT', c.MQTT_WS_PORT] as const]),
  ] as const
  for (const [i, [second, port]] of listeners.entries()) {
    const first = listeners.slice(0, i).find(([, p]) => p === port && port !== 0)
    if (first) return { first: first[0], second, port }
  }
  return null
}

/** Settings of the embedded broker, which does not run with `MQTT_URL`. */
const EMBEDDED_BROKER_ONLY = [
  'MQTT_PORT',
  'MQTT_WS_PORT',
  'MQTT_MAX_PACKET_BYTES',
  'MQTT_CONNECT_TIMEOUT_S',
  'MQTT_MAX_SESSIONS_PER_TOTE',
  'MQTT_MAX_QUEUED_PER_SESSION',
] as const
/** Settings of an ingest worker, which only runs with `MQTT_URL`. */
const EXTERNAL_BROKER_ONLY = [
  'MQTT_CLIENT_ID',
  'MQTT_INGEST_CONNECTIONS',
  'MQTT_SESSION_EXPIRY_S',
  'MQTT_PROVISIONING',
  'MQTT_PUBLIC_URL',
] as const

/** A combination of variables no mode uses: one of them would be silently ignored. */
function unusedVariable(present: Record<string, unknown>): string | null {
  if (present.MQTT_URL !== undefined) {
    // MQTT_WS_PORT=off says what is true anyway: this process listens for no MQTT at all.
    const unused = EMBEDDED_BROKER_ONLY.find((name) => present[name] !== undefined && !(name === 'MQTT_WS_PORT' && present[name] === 'off'))
    return unused ? `${unused}: has no effect with MQTT_URL (no embedded broker runs); unset one of them` : null
  }
  const unused = EXTERNAL_BROKER_ONLY.find((name) => present[name] !== undefined)
  return unused ? `${unused}: has effect only with MQTT_URL (an external broker); set MQTT_URL or unset ${unused}` : null
}

/**
 * INGEST_GATHER_MS, or its default: 2 ms with the embedded broker, where each tote's PUBACK
 * waits for the write; 20 ms with MQTT_URL, where the broker has answered the tote already and
 * only the events wait. Fewer, bigger writes cost far less CPU in the copy and in the database
 * (docs/performance.md, bench:ingest --mode external).
 */
export function ingestGatherMs(config: Pick<Config, 'INGEST_GATHER_MS' | 'MQTT_URL'>): number {
  return config.INGEST_GATHER_MS ?? (config.MQTT_URL ? 20 : 2)
}

export class ConfigError extends Error {}

/** Parses the environment; the error message is one line naming the offending variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // A blank value is no value: Number(' ') is 0, which would turn expiry off or a limit to zero unseen.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v.trim() !== ''))
  const result = configSchema.safeParse(present)
  if (result.success) {
    const unused = unusedVariable(present)
    if (unused) {
      const name = unused.slice(0, unused.indexOf(':'))
      throw new ConfigError(`invalid configuration: ${name}=${shown(name, env[name])}${unused.slice(name.length)}`)
    }
    return result.data
  }
  const issue = result.error.issues[0]!
  const name = String(issue.path[0] ?? 'environment')
  throw new ConfigError(`invalid configuration: ${name}=${shown(name, env[name])}: ${issue.message}`)
}

/** Variables whose value is a secret: an error line names them but never prints them. */
const SECRET_VARIABLES = new Set(['ADMIN_CLIENT_SECRET', 'SECRETS_KEY', 'SECRETS_KEY_PREVIOUS'])

/** A variable's value for an error line: a URL's password and a secret are never printed. */
function shown(name: string, value: string | undefined): string {
  if (SECRET_VARIABLES.has(name) && value) return '(hidden)'
  return JSON.stringify(name.endsWith('_URL') && value ? withoutPassword(value) : (value ?? ''))
}

export function issuerOf(config: Pick<Config, 'ISSUER' | 'PORT'>): string {
  return (config.ISSUER ?? `http://localhost:${config.PORT}`).replace(/\/$/, '')
}

/**
 * Where the console's sign-in returns (docs/console.md): ISSUER's /console/ when the operator set
 * the public URL; otherwise this machine's names for the port actually bound.
 */
export function consoleRedirectUris(config: Pick<Config, 'ISSUER'>, httpPort: number): string[] {
  if (config.ISSUER) return [`${config.ISSUER.replace(/\/$/, '')}/console/`]
  return [`http://localhost:${httpPort}/console/`, `http://127.0.0.1:${httpPort}/console/`]
}
