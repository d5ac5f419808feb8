import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient } from 'kysely'
import pg from 'pg'
import type { Dialect } from './dialect.js'
import type { Database, Db } from './schema.js'
import { migrateToLatest } from './migrations/index.js'
import { OwnSchemaPostgresDialect } from './migrations/own-schema-introspector.js'
import { GroupCommitSqliteDialect } from './sqlite-group-commit.js'
import { createPrivateFile, ensurePrivateDataDir } from './private-files.js'
import { checkpointOffThread } from './wal-checkpointer.js'
import { isNoAnswer, watchPool, type AnswerWatch } from './answer-watch.js'

export type { Dialect } from './dialect.js'

/** The entity store: one kysely instance whatever the engine, so every query is written once. */
export interface EntityStore {
  db: Db
  dialect: Dialect
  ping(): Promise<void>
  close(): Promise<void>
}

/** Deadlines of a PostgreSQL store (`DATABASE_*_TIMEOUT_MS`); SQLite has no network to wait for. */
export type PostgresLimits = {
  connectTimeoutMs: number
  statementTimeoutMs: number
  idleInTransactionTimeoutMs: number
}

export const DEFAULT_POSTGRES_LIMITS: PostgresLimits = {
  connectTimeoutMs: 5_000,
  statementTimeoutMs: 15_000,
  idleInTransactionTimeoutMs: 60_000,
}

export function postgresLimitsOf(config: {
  DATABASE_CONNECT_TIMEOUT_MS: number
  DATABASE_STATEMENT_TIMEOUT_MS: number
  DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: number
}): PostgresLimits {
  return {
    connectTimeoutMs: config.DATABASE_CONNECT_TIMEOUT_MS,
    statementTimeoutMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    idleInTransactionTimeoutMs: config.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
  }
}

/** Where a dropped connection is reported; it never stops the process. */
export type ConnectionErrorLog = (err: Error, what: string) => void

export type EntityStoreOptions =
  { kind: 'sqlite'; file: string /* a path, or ':memory:' */ } | { kind: 'postgres'; url: string; schema?: string /* isolates test runs */ }

// PostgreSQL returns int8 (bigserial, count(*)) as strings; our counts and positions fit a double.
pg.types.setTypeParser(20, Number)

export async function openEntityStore(
  options: EntityStoreOptions,
  {
    limits = DEFAULT_POSTGRES_LIMITS,
    onConnectionError = () => {},
    sqliteCacheMiB = DEFAULT_SQLITE_CACHE_MIB,
  }: { limits?: PostgresLimits; onConnectionError?: ConnectionErrorLog; sqliteCacheMiB?: number } = {},
): Promise<EntityStore> {
  if (options.kind === 'sqlite') {
    const store = openSqlite(options.file, sqliteCacheMiB)
    await migrateToLatest(store.db, store.dialect, undefined)
    return store
  }
  await migratePostgres(options.url, options.schema, limits, onConnectionError)
  return openPostgres(options.url, options.schema, limits, onConnectionError)
}

async function currentSchema(db: Db): Promise<string | undefined> {
  const { rows } = await sql<{ schema: string | null }>`select current_schema() as schema`.execute(db)
  return rows[0]?.schema ?? undefined
}

export function entityStoreOptions(config: { DATA_DIR: string; DATABASE_URL?: string | undefined }): EntityStoreOptions {
  if (config.DATABASE_URL) return { kind: 'postgres', url: config.DATABASE_URL }
  ensurePrivateDataDir(config.DATA_DIR)
  return { kind: 'sqlite', file: join(config.DATA_DIR, 'rxtrace.db') }
}

// The request connection's own checkpoint, which lets the WAL start over: 64 MiB, about 800
// creates' worth (~20 pages each), mostly copied by the worker beforehand.
const REQUEST_CONNECTION_CHECKPOINT_BYTES = 64 * 1024 * 1024

/** `SQLITE_CACHE_MIB`'s default: the page cache every create's index pages fit in. */
const DEFAULT_SQLITE_CACHE_MIB = 64

function openSqlite(file: string, cacheMiB: number): EntityStore {
  createPrivateFile(file) // 0600, and the -wal and -shm files SQLite makes beside it
  const database = new SqliteDatabase(file)
  // WAL lets readers run beside the writer; NORMAL sync is durable across process crashes
  // (only an OS crash can lose the last commits), the usual trade-off for WAL.
  database.pragma('journal_mode = WAL')
  database.pragma('synchronous = NORMAL')
  database.pragma('busy_timeout = 5000')
  // The default page cache (2 MiB) is smaller than the index pages every create touches; with
  // 64 MiB they stay in memory instead of being read back from the WAL (−13 % SQLite time per create).
  // It fills with whatever pages were used last, large stored answers included, and stays full:
  // the process's memory grows by up to this much and keeps it (docs/operations.md, Memory).
  database.pragma(`cache_size = -${cacheMiB * 1024}`) // negative: KiB, not pages
  // Each transaction of a group commit runs in a savepoint, whose undo copies of the pages it
  // touches would otherwise go to a temporary file: in memory they cost a third as much.
  database.pragma('temp_store = MEMORY')
  // A file database checkpoints mostly on a worker thread, not inside request commits (see
  // wal-checkpointer.ts). When the WAL restarts from its start, its file is cut back to the
  // size it reaches between the request connection's own checkpoints.
  const checkpointer = checkpointOffThread(database, file, {
    writerCheckpointBytes: REQUEST_CONNECTION_CHECKPOINT_BYTES,
    walSizeLimitBytes: REQUEST_CONNECTION_CHECKPOINT_BYTES,
  })
  const db = new Kysely<Database>({ dialect: new GroupCommitSqliteDialect(database) })
  return {
    db,
    dialect: 'sqlite',
    ping: async () => void database.prepare('select 1').get(),
    close: async () => {
      await checkpointer?.stop()
      await db.destroy()
    },
  }
}

/**
 * Migrations run on their own connection, without the statement deadline: creating an index on a
 * large table may rightly take longer than any request should.
 */
async function migratePostgres(url: string, schema: string | undefined, limits: PostgresLimits, onConnectionError: ConnectionErrorLog) {
  if (schema) {
    const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: limits.connectTimeoutMs })
    admin.on('error', (err) => onConnectionError(err, 'schema setup connection'))
    await admin.connect()
    try {
      await admin.query(`create schema if not exists "${schema.replace(/"/g, '')}"`)
    } finally {
      await admin.end()
    }
  }
  const pool = createPool(url, schema, { ...limits, statementTimeoutMs: 0 }, onConnectionError, 1)
  const db = new Kysely<Database>({ dialect: new OwnSchemaPostgresDialect({ pool: guardedPool(pool) }) })
  try {
    // kysely's Migrator finds its bookkeeping tables in any schema of the database unless told
    // which one is ours; another schema's tables (another app, another test run) would hide ours.
    await migrateToLatest(db, 'postgres', await currentSchema(db))
  } finally {
    await db.destroy()
  }
}

function openPostgres(url: string, schema: string | undefined, limits: PostgresLimits, onConnectionError: ConnectionErrorLog): EntityStore {
  const pool = createPool(url, schema, limits, onConnectionError, 10)
  const watch = watchPool(pool, url, limits.connectTimeoutMs)
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: guardedPool(pool, watch) }) })
  return {
    db,
    dialect: 'postgres',
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  }
}

// Past the server's own statement_timeout, the server had its chance to cancel and say so: no
// answer by then means it cannot (a partition, a dead host), and the client stops waiting.
const READ_TIMEOUT_MARGIN_MS = 1_000

/**
 * A pool that survives the database going away. node-postgres emits 'error' on a connection the
 * server drops (a restart, pg_terminate_backend, a proxy cutting an idle connection); an 'error'
 * event nobody listens to kills the process, so the pool and every one of its connections get a
 * listener. The broken connection is then discarded and the next query opens a new one.
 */
export function createPool(
  url: string,
  schema: string | undefined,
  limits: PostgresLimits,
  onConnectionError: ConnectionErrorLog,
  max: number,
): pg.Pool {
  const settings = [
    ...(schema ? [`-c search_path="${schema.replace(/"/g, '')}"`] : []),
    `-c statement_timeout=${limits.statementTimeoutMs}`,
    `-c idle_in_transaction_session_timeout=${limits.idleInTransactionTimeoutMs}`,
  ]
  const pool = new pg.Pool({
    connectionString: url,
    max,
    options: settings.join(' '),
    // Covers both opening a connection and waiting for a free one in the pool.
    connectionTimeoutMillis: limits.connectTimeoutMs,
    ...(limits.statementTimeoutMs > 0 ? { query_timeout: limits.statementTimeoutMs + READ_TIMEOUT_MARGIN_MS } : {}),
    // TCP keepalive finds a peer that vanished without closing (a host down, a NAT forgetting us).
    keepAlive: true,
  })
  pool.on('error', (err) => onConnectionError(err, 'idle database connection lost'))
  pool.on('connect', (client) => client.on('error', (err) => onConnectionError(err, 'database connection lost')))
  return pool
}

/**
 * The pool as kysely sees it, with two fixes. A query that timed out on the client side
 * (query_timeout), or that the answer watch gave up on, leaves its connection waiting for an answer
 * that may never come: every later query on it (a transaction's ROLLBACK) fails at once instead of
 * queueing behind it for another deadline, and the connection is destroyed on release instead of
 * going back to the pool. With a watch, a silent database fails queries after the connect deadline
 * rather than the statement deadline (see answer-watch.ts).
 */
function guardedPool(pool: pg.Pool, watch?: AnswerWatch): PostgresPool {
  return {
    async connect() {
      watch?.checkAnswering()
      const client = await pool.connect()
      let broken: Error | undefined
      const query = (sqlOrCursor: unknown, parameters?: readonly unknown[]) => {
        if (broken) return Promise.reject(broken)
        if (typeof sqlOrCursor !== 'string') return client.query(sqlOrCursor as pg.Submittable)
        try {
          watch?.checkAnswering()
        } catch (error) {
          return Promise.reject(error)
        }
        const sent = client.query(sqlOrCursor, parameters as unknown[])
        return (watch ? watch.wait(sent) : sent).catch((error: unknown) => {
          if (error instanceof Error && (error.message === 'Query read timeout' || isNoAnswer(error))) broken = error
          throw error
        })
      }
      return { query, release: () => client.release(broken) } as unknown as PostgresPoolClient
    },
    end: () => pool.end(),
  }
}
