import { dirname } from 'node:path'
import Database from 'better-sqlite3'
import { createPrivateFile, ensurePrivateDataDir } from '../store/private-files.js'
import { checkpointOffThread, type WalCheckpointer } from '../store/wal-checkpointer.js'

/**
 * The readings file's dictionary and span tables (see sqlite-sink.ts for why they look like this);
 * the readings themselves are in day partitions (sqlite-partitions.ts).
 */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS totes (
  tote_key INTEGER PRIMARY KEY,
  tote_id  TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS bindings (
  binding_key INTEGER PRIMARY KEY,
  delivery_id TEXT,
  rx_id       TEXT
);
CREATE INDEX IF NOT EXISTS bindings_by_delivery ON bindings (delivery_id, rx_id);
CREATE TABLE IF NOT EXISTS binding_spans (
  binding_key INTEGER NOT NULL,
  tote_key    INTEGER NOT NULL,
  from_ts     INTEGER NOT NULL,
  to_ts       INTEGER NOT NULL,
  PRIMARY KEY (binding_key, tote_key)
) WITHOUT ROWID;
`

/**
 * Files written before binding_spans: derive the spans from the old index once, then drop it
 * (before the single readings table moves into day partitions, migrateLegacyReadings).
 */
const MIGRATE_BINDING_INDEX = `
INSERT INTO binding_spans (binding_key, tote_key, from_ts, to_ts)
  SELECT binding_key, tote_key, min(ts), max(ts) FROM readings WHERE binding_key IS NOT NULL GROUP BY binding_key, tote_key
  ON CONFLICT (binding_key, tote_key) DO UPDATE SET from_ts = min(from_ts, excluded.from_ts), to_ts = max(to_ts, excluded.to_ts);
DROP INDEX readings_by_binding;
`

/**
 * When the WAL should start over: under steady writes the worker's checkpoints never end level
 * with the writer, and only a checkpoint that does lets the WAL start from its beginning again.
 * Past this the worker catches up and `write` pauses for its last, short pass
 * (store/wal-checkpointer.ts). 20,000 single readings/s write ~100 MiB of WAL a second (each
 * dirties its tote's leaf of the (tote_key, ts) index): a pause every ~1.1 s under that load,
 * 4–11 ms (batches: 2–5 ms). Twice this held the writer's p99 no better and let the WAL reach the
 * writer's own threshold.
 */
const LEVEL_AT_BYTES = 64 * 1024 * 1024
/**
 * The writer's own automatic checkpoint, inside a commit, in case the worker cannot level the
 * WAL (it died, or the disk is too slow for it to catch up). It copies every page the worker
 * has not: up to a second's pages, 100–250 ms at 15,000 single readings/s, which was every
 * PUBACK's p99 before the worker leveled the WAL itself.
 */
const WRITER_AUTOCHECKPOINT_BYTES = 256 * 1024 * 1024
/**
 * Once the WAL restarts, a file grown past this (by a burst beyond the writer's threshold) is cut
 * back to it. Not lower: truncating a few hundred MiB of WAL stalls the commit doing it by ~200 ms.
 */
const WAL_SIZE_LIMIT_BYTES = 320 * 1024 * 1024
/**
 * 4 KiB pages for new files. Each commit writes every page it dirtied to the WAL, and a single
 * reading dirties one leaf page of the (tote_key, ts) index (its tote's newest entries), so WAL
 * bytes per reading are about a page (two while readings_by_binding existed, when this was
 * chosen: with months of history per tote, 1,000 totes sending single readings cost 47 µs/row
 * with 16 KiB pages and 24 µs/row with 4 KiB, in-process on a loaded 2-core machine); 10,000-row
 * sorted batches are ~10 % slower with 4 KiB. 1 and 2 KiB were measured too (docs/performance.md).
 * The 64 MiB cache holds 16,384 of them: the index paths of tens of thousands of active totes.
 */
const PAGE_SIZE = 4096

/**
 * Opens (or creates, 0600 in a private directory) the readings file: WAL, its page size and
 * cache, the schema with any old file migrated, and the off-thread checkpointer (null for
 * ':memory:').
 */
export function openReadingsFile(path: string): { db: Database.Database; checkpointer: WalCheckpointer | null } {
  if (path !== ':memory:') {
    ensurePrivateDataDir(dirname(path))
    createPrivateFile(path) // 0600, and the -wal and -shm files SQLite makes beside it
  }
  const db = new Database(path)
  db.pragma(`page_size = ${PAGE_SIZE}`) // only takes effect on a new file, before WAL is switched on
  db.pragma('journal_mode = WAL')
  db.pragma('synchronous = NORMAL')
  db.pragma('cache_size = -65536')
  db.exec(SCHEMA)
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'readings_by_binding'").get()) {
    db.transaction(() => db.exec(MIGRATE_BINDING_INDEX))()
  }
  const checkpointer = checkpointOffThread(db, path, {
    levelAtBytes: LEVEL_AT_BYTES,
    writerCheckpointBytes: WRITER_AUTOCHECKPOINT_BYTES,
    walSizeLimitBytes: WAL_SIZE_LIMIT_BYTES,
  })
  return { db, checkpointer }
}
