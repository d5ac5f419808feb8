import type { Config } from '../config.js'
import { naming } from '../startup-error.js'
import {
  entityStoreOptions,
  openEntityStore,
  type ConnectionErrorLog,
  type EntityStoreOptions,
  type PostgresLimits,
} from '../store/database.js'
import type { sharedStoreWiring } from '../telemetry/shared-store.js'
import { createReadingSink, type ReadingSink } from '../timeseries/index.js'

type StoreOptions = { limits: PostgresLimits; onConnectionError: ConnectionErrorLog; sqliteCacheMiB?: number }
/** The PostgreSQL that several copies of the service may share, or null on SQLite. */
export type SharedPostgres = { url: string; schema: string | undefined } | null
type SharedStore = Awaited<ReturnType<typeof sharedStoreWiring>>

/**
 * The entity store: the test's own (`override`), else DATABASE_URL's PostgreSQL, else SQLite in
 * DATA_DIR. A dropped connection fails only the queries on it (503 to their requests); the pool
 * opens new ones as the database comes back.
 */
export function openEntityStoreOf(config: Config, override: EntityStoreOptions | undefined, options: StoreOptions) {
  if (override) return openEntityStore(override, options)
  if (config.DATABASE_URL)
    return naming('DATABASE_URL', config.DATABASE_URL, 'PostgreSQL', () => openEntityStore(entityStoreOptions(config), options))
  return openEntityStore(entityStoreOptions(config), options)
}

export function sharedPostgresOf(config: Config, override: EntityStoreOptions | undefined): SharedPostgres {
  if (override?.kind === 'postgres') return { url: override.url, schema: override.schema }
  return !override && config.DATABASE_URL ? { url: config.DATABASE_URL, schema: undefined } : null
}

/**
 * The readings store: the test's own (`override`), else QuestDB (QUESTDB_CONFIG), else the
 * shared PostgreSQL, else SQLite in DATA_DIR. Beside a shared store, readings reach the copy
 * that evaluates their delivery: PostgreSQL's sink forwards in the insert's own transaction,
 * any other sink right after its own write, before the PUBACK.
 */
export async function openReadingSinkOf(
  config: Config,
  {
    override,
    postgres,
    shared,
    storeOptions,
  }: { override: ReadingSink | undefined; postgres: SharedPostgres; shared: SharedStore | null; storeOptions: StoreOptions },
): Promise<ReadingSink> {
  const openSink = () =>
    createReadingSink({
      dataDir: config.DATA_DIR,
      questdbConfig: config.QUESTDB_CONFIG,
      // DATABASE_URL without QUESTDB_CONFIG: readings in PostgreSQL, forwarded in the insert's own transaction.
      postgres: postgres ? { ...postgres, ...storeOptions, ...(shared ? { forward: shared.forward } : {}) } : undefined,
    })
  const opened =
    override ?? (config.QUESTDB_CONFIG ? await naming('QUESTDB_CONFIG', config.QUESTDB_CONFIG, 'QuestDB', openSink) : await openSink())
  return shared && !(postgres && !override && !config.QUESTDB_CONFIG) ? shared.forwardingAfter(opened) : opened
}
