import { randomBytes } from 'node:crypto'
import pg from 'pg'
import type { ServiceOverrides } from '../../src/service.js'
import { startTestService, type TestApi } from './service.js'

/**
 * An entity store the behaviour suites run against: each `start()` builds a whole service on a
 * fresh, empty store, so suites written once prove the same behaviour on SQLite and PostgreSQL.
 */
export type StoreUnderTest = {
  name: 'sqlite' | 'postgres'
  start(env?: Record<string, string>, overrides?: Omit<ServiceOverrides, 'store'>): Promise<TestApi>
  /** Drops whatever the store created; call from afterAll. */
  cleanup(): Promise<void>
}

export const sqliteStore: StoreUnderTest = {
  name: 'sqlite',
  start: (env = {}, overrides = {}) => startTestService(env, overrides),
  cleanup: async () => {},
}

const POSTGRES_URLS = process.env.TEST_DATABASE_URL
  ? [process.env.TEST_DATABASE_URL]
  : ['postgres://postgres@127.0.0.1:5432/test', 'postgres://root@127.0.0.1:5432/test']

/** The first PostgreSQL URL that accepts a connection, with the reason each one failed. */
export async function reachablePostgres(): Promise<{ url: string | null; reasons: string[] }> {
  const reasons: string[] = []
  for (const url of POSTGRES_URLS) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2_000 })
    try {
      await client.connect()
      await client.query('select 1')
      return { url, reasons }
    } catch (error) {
      reasons.push(`${url}: ${(error as Error).message}`)
    } finally {
      await client.end().catch(() => {})
    }
  }
  return { url: null, reasons }
}

/** Each service gets its own schema (`rx_test_<random>`), dropped by `cleanup()`. */
export function postgresStore(url: string): StoreUnderTest {
  const schemas: string[] = []
  return {
    name: 'postgres',
    start(env = {}, overrides = {}) {
      const schema = `rx_test_${randomBytes(6).toString('hex')}`
      schemas.push(schema)
      return startTestService(env, { ...overrides, store: { kind: 'postgres', url, schema } })
    },
    async cleanup() {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        for (const schema of schemas.splice(0)) await client.query(`drop schema if exists "${schema}" cascade`)
      } finally {
        await client.end()
      }
    },
  }
}

/**
 * Fresh, migrated schemas of one PostgreSQL database (the entity store's tables, and migration
 * 0009's `readings` and `rule_leases`), for tests that build stores or copies of the service on
 * them directly. `drop()` removes every schema made.
 */
export function postgresSchemas(url: string) {
  const made: string[] = []
  return {
    async create(): Promise<string> {
      const schema = `rx_test_${randomBytes(6).toString('hex')}`
      made.push(schema)
      const { openEntityStore } = await import('../../src/store/database.js')
      const store = await openEntityStore({ kind: 'postgres', url, schema })
      await store.close()
      return schema
    },
    async drop(): Promise<void> {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      try {
        for (const schema of made.splice(0)) await client.query(`drop schema if exists "${schema}" cascade`)
      } finally {
        await client.end()
      }
    },
  }
}
