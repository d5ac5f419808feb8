import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { startTestService, type TestApi } from '../../helpers/service.js'

export type InProcessBenchService = {
  api: TestApi
  /** Which entity store the run used, for the JSON a benchmark prints. */
  store: 'postgres' | 'sqlite'
  /** Stops the service and removes what it stored: the temporary DATA_DIR, and the PostgreSQL schema. */
  stop(): Promise<void>
}

/**
 * The whole service in this process on a SQLite file in a fresh temporary DATA_DIR, or on
 * PostgreSQL (`databaseUrl`) in a schema of its own, dropped by `stop`. For benchmarks that read
 * the service's memory or seed its store directly.
 */
export async function startInProcessBenchService(
  name: string,
  env: Record<string, string>,
  databaseUrl: string,
): Promise<InProcessBenchService> {
  const dataDir = mkdtempSync(join(tmpdir(), `rxtrace-bench-${name}-`))
  const schema = `rx_bench_${randomBytes(4).toString('hex')}`
  const api = await startTestService(
    { DATA_DIR: dataDir, ...env },
    { store: databaseUrl ? { kind: 'postgres', url: databaseUrl, schema } : { kind: 'sqlite', file: join(dataDir, 'rxtrace.db') } },
  )
  const stop = async () => {
    await api.stop()
    if (databaseUrl) {
      const client = new pg.Client({ connectionString: databaseUrl })
      await client.connect()
      await client.query(`drop schema if exists "${schema}" cascade`)
      await client.end()
    }
    rmSync(dataDir, { recursive: true, force: true })
  }
  return { api, store: databaseUrl ? 'postgres' : 'sqlite', stop }
}
