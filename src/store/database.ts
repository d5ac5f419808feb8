import { join } from 'node:path'
import SqliteDatabase from 'better-sqlite3'
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import type { Database, Db } from './schema.js'
import { migrateToLatest } from './migrations/index.js'
import { GroupCommitSqliteDialect } from './sqlite-group-commit.js'
import { createPrivateFile, ensurePrivateDataDir } from './private-files.js'
import { checkpointOffThread } from './wal-checkpointer.js'

export type Dialect = 'sqlite' | 'postgres'

/** The entity store: one kysely instance whatever the engine, so every query is written once. */
export interface EntityStore {
  db: Db
  dialect: Dialect
  ping(): Promise<void>
  close(): Promise<void>
}

export type EntityStoreOptions =
  | { kind: 'sqlite'; file: string /* a path, or ':memory:' */ }
  | { kind: 'postgres'; url: string; schema?: string /* isolates test runs */ }

// PostgreSQL returns int8 (bigserial, count(*)) as strings; our counts and positions fit a double.
pg.types.setTypeParser(20, Number)

export async function openEntityStore(options: EntityStoreOptions): Promise<EntityStore> {
  const store = options.kind === 'sqlite' ? openSqlite(options.file) : await openPostgres(options.url, options.schema)
  // kysely's Migrator finds its bookkeeping tables in any schema of the database unless told
  // which one is ours; another schema's tables (another app, another test run) would hide ours.
  const schema = store.dialect === 'postgres' ? await currentSchema(store.db) : undefined
  await migrateToLatest(store.db, store.dialect, schema)
  return store
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

function openSqlite(file: string): EntityStore {
  createPrivateFile(file) // 0600, and the -wal and -shm files SQLite makes beside it
  const database = new SqliteDatabase(file)
  // WAL lets readers run beside the writer; NORMAL sync is durable across process crashes
  // (only an OS crash can lose the last commits), the usual trade-off for WAL.
  database.pragma('journal_mode = WAL')
  database.pragma('synchronous = NORMAL')
  database.pragma('busy_timeout = 5000')
  // The default page cache (2 MiB) is smaller than the index pages every create touches; with
  // 64 MiB they stay in memory instead of being read back from the WAL (−13 % SQLite time per create).
  database.pragma('cache_size = -65536')
  // Each transaction of a group commit runs in a savepoint, whose undo copies of the pages it
  // touches would otherwise go to a temporary file: in memory they cost a third as much.
  database.pragma('temp_store = MEMORY')
  // A file database checkpoints mostly on a worker thread, not inside request commits (see
  // wal-checkpointer.ts). When the WAL restarts from its start, its file is cut back to the
  // size it reaches between the request connection's own checkpoints.
  const checkpointer = checkpointOffThread(database, file, { writerCheckpointBytes: REQUEST_CONNECTION_CHECKPOINT_BYTES, walSizeLimitBytes: REQUEST_CONNECTION_CHECKPOINT_BYTES })
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

async function openPostgres(url: string, schema?: string): Promise<EntityStore> {
  if (schema) {
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    await admin.query(`create schema if not exists "${schema.replace(/"/g, '')}"`)
    await admin.end()
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    ...(schema ? { options: `-c search_path="${schema.replace(/"/g, '')}"` } : {}),
  })
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) })
  return {
    db,
    dialect: 'postgres',
    ping: async () => void (await sql`select 1`.execute(db)),
    close: () => db.destroy(),
  }
}
