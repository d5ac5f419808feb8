import { join } from 'node:path'
import type { ConnectionErrorLog, PostgresLimits } from '../store/database.js'
import { createPostgresSink, type PostgresSinkOptions } from './postgres-sink.js'
import { createQuestdbSink } from './questdb-sink.js'
import type { ReadingSink } from './sink.js'
import { createSqliteSink } from './sqlite-sink.js'

export type { ReadingRow, ReadingSink, TemperatureBucket } from './sink.js'

export type ReadingSinkConfig = {
  /** `DATA_DIR`: the SQLite sink's file is `readings.db` in it. */
  dataDir: string
  /** `QUESTDB_CONFIG`: the official client's config string; when set, readings go to QuestDB instead. */
  questdbConfig?: string | undefined
  /**
   * The entity store's PostgreSQL (`DATABASE_URL`): without `QUESTDB_CONFIG`, readings go to its
   * `readings` table, shared by every copy of the service.
   */
  postgres?:
    | {
        url: string
        schema?: string | undefined
        limits?: PostgresLimits
        onConnectionError?: ConnectionErrorLog
        forward?: PostgresSinkOptions['forward']
      }
    | undefined
}

/** Picks the time-series adapter from configuration (`QUESTDB_CONFIG`, `DATABASE_URL`; README, Configuration). */
export async function createReadingSink({ dataDir, questdbConfig, postgres }: ReadingSinkConfig): Promise<ReadingSink> {
  if (questdbConfig !== undefined && questdbConfig !== '') return createQuestdbSink({ config: questdbConfig })
  if (postgres !== undefined) return createPostgresSink(postgres)
  return createSqliteSink({ path: join(dataDir, 'readings.db') })
}
