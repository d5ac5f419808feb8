import { join } from 'node:path'
import { createQuestdbSink } from './questdb-sink.js'
import type { ReadingSink } from './sink.js'
import { createSqliteSink } from './sqlite-sink.js'

export type { ReadingRow, ReadingSink, TemperatureBucket } from './sink.js'

export type ReadingSinkConfig = {
  /** `DATA_DIR`: the SQLite sink's file is `readings.db` in it. */
  dataDir: string
  /** `QUESTDB_CONFIG`: the official client's config string; when set, readings go to QuestDB instead. */
  questdbConfig?: string | undefined
}

/** Picks the time-series adapter from configuration (`QUESTDB_CONFIG`, README, Configuration). */
export async function createReadingSink({ dataDir, questdbConfig }: ReadingSinkConfig): Promise<ReadingSink> {
  if (questdbConfig !== undefined && questdbConfig !== '') return createQuestdbSink({ config: questdbConfig })
  return createSqliteSink({ path: join(dataDir, 'readings.db') })
}
