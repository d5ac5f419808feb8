import { join } from 'node:path'
import { createQuestdbSink } from './questdb-sink.js'
import type { ReadingSink } from './sink.js'
import { createThreadedSqliteSink } from './sqlite-sink-thread.js'

export type { ReadingRow, ReadingSink, TemperatureBucket } from './sink.js'

export type ReadingSinkConfig = {
  /** `DATA_DIR`: the SQLite sink's file is `readings.db` in it. */
  dataDir: string
  /** `QUESTDB_CONFIG`: the official client's config string; when set, readings go to QuestDB instead. */
  questdbConfig?: string | undefined
}

/** Picks the time-series adapter from configuration (SPEC §1). */
export async function createReadingSink({ dataDir, questdbConfig }: ReadingSinkConfig): Promise<ReadingSink> {
  if (questdbConfig !== undefined && questdbConfig !== '') return createQuestdbSink({ config: questdbConfig })
  // Its own thread: the commits of single readings would otherwise take a fifth of the event loop.
  return createThreadedSqliteSink({ path: join(dataDir, 'readings.db') })
}
