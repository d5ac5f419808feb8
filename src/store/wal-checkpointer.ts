import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type SqliteDatabase from 'better-sqlite3'

// Often enough that the WAL stays short between the request connection's own checkpoints,
// rarely enough that each pass copies many versions of the same hot pages at once.
const CHECKPOINT_EVERY_MS = 1_000
// A leveling pass is awaited by paused writes; past this the writer goes on without it.
const LEVEL_TIMEOUT_MS = 500
// After a leveling that timed out or did not end level (a slow disk, a long reader elsewhere),
// the worker's requests are ignored this long, doubling up to the maximum, so writes are not
// paused again and again for nothing; the writer's own checkpoint is the fallback meanwhile.
const LEVEL_BACKOFF_MS = 5_000
const LEVEL_BACKOFF_MAX_MS = 300_000

export type WalCheckpointer = {
  /**
   * True when the WAL should start over (see `levelAtPages`) and the worker is close enough
   * behind the writer that a pass with writes paused will be short.
   */
  readonly levelWanted: boolean
  /**
   * Call with the connection's writes paused (no write until this resolves): the worker copies
   * the last pages, so the next commit starts the WAL over from its beginning. Resolves when
   * that pass is done, or after `levelTimeoutMs` whatever happened; never rejects.
   */
  level(): Promise<void>
  stop(): Promise<void>
}

export type WalCheckpointerOptions = {
  /**
   * Ask the writer to pause (`levelWanted`) once the WAL holds this many pages. Without it, the
   * writer's own automatic checkpoint is what restarts the WAL.
   */
  levelAtPages?: number
  /** Between two routine passes (tests shorten it). */
  everyMs?: number
  /** How long `level()` waits for the worker's pass (tests lengthen it). */
  levelTimeoutMs?: number
}

type FromWorker = 'ready' | { leveled: number; level: boolean }

/**
 * Moves nearly all of SQLite's WAL checkpoint work off the event loop. SQLite's automatic
 * checkpoint runs inside the commit that crosses its threshold (1,000 pages by default, about
 * 50 creates), on the connection that commits: it copies those pages into the database file
 * and fsyncs it, stalling every request for milliseconds. Here a worker thread with its own
 * connection runs a PASSIVE checkpoint (it never waits for, nor blocks, the writer) every
 * second, and the writer's own threshold is raised.
 *
 * Why the writer must still let the WAL catch up: under steady writes a PASSIVE checkpoint from
 * another connection never ends level with the writer, and SQLite starts the WAL over from its
 * beginning only after a checkpoint that did. Either the writer's rare automatic checkpoint does
 * it (the request connection: it runs right after its own commit, and the worker has already
 * copied all but the last second's pages), or, with `levelAtPages` (the readings sink, whose
 * writes are fast enough that even one second of pages took 100–250 ms to copy inside a
 * commit), the worker does it: past the threshold it checkpoints back to back until a pass is
 * short, then asks the writer to pause for one last pass, during which the event loop stays free.
 * Durability does not change: a commit is durable when it is in the WAL (synchronous = NORMAL),
 * and pages reach the database file only through SQLite's own checkpoint.
 *
 * The worker is a few lines of plain JavaScript evaluated in the thread, so it loads the same
 * better-sqlite3 as the service whether the service runs from TypeScript (tsx) or compiled.
 */
export function startWalCheckpointer(file: string, options: WalCheckpointerOptions = {}): WalCheckpointer {
  const { levelAtPages = 0, everyMs = CHECKPOINT_EVERY_MS, levelTimeoutMs = LEVEL_TIMEOUT_MS } = options
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver, file, everyMs, levelAtPages, shortPassMs: SHORT_PASS_MS },
  })
  // A failed pass changes nothing: the next one, or the writer's own, copies the pages.
  let failure: unknown = null
  worker.on('error', (error) => void (failure = error))
  let stopping = false
  let gone = false
  // Listened for from the start: a worker that already died must not leave stop() waiting.
  const exited = new Promise((resolve) => worker.once('exit', resolve)).then(() => {
    gone = true
    finishLeveling(false)
    // Not fatal (the writer's own checkpoint takes over), but its commits will be slower: say why.
    if (!stopping) process.emitWarning(`WAL checkpointer for ${file} stopped: ${failure instanceof Error ? failure.message : 'exited'}`)
  })

  let levelWanted = false
  let requests = 0
  let leveling: { id: number; done: Promise<void>; resolve: () => void; timeout: NodeJS.Timeout } | null = null
  let backoffMs = LEVEL_BACKOFF_MS
  let ignoreReadyUntil = 0
  const finishLeveling = (level: boolean) => {
    if (!leveling) return
    clearTimeout(leveling.timeout)
    leveling.resolve()
    leveling = null
    if (level) backoffMs = LEVEL_BACKOFF_MS
    else {
      ignoreReadyUntil = Date.now() + backoffMs
      backoffMs = Math.min(backoffMs * 2, LEVEL_BACKOFF_MAX_MS)
    }
  }
  worker.on('message', (message: FromWorker) => {
    if (message === 'ready') levelWanted = leveling === null && Date.now() >= ignoreReadyUntil
    else if (message.leveled === leveling?.id) finishLeveling(message.level) // a late answer to a timed-out request is ignored
  })
  worker.unref()
  return {
    get levelWanted() {
      return levelWanted
    },
    level() {
      levelWanted = false
      if (gone) return Promise.resolve()
      if (!leveling) {
        const id = ++requests
        let resolve!: () => void
        const done = new Promise<void>((r) => (resolve = r))
        leveling = { id, done, resolve, timeout: setTimeout(() => finishLeveling(false), levelTimeoutMs) }
        worker.postMessage({ level: id })
      }
      return leveling.done
    },
    async stop() {
      stopping = true
      // Referenced again while it stops, or a process with nothing else to do would end before
      // this resolves (and skip whatever follows the close, such as an error message).
      worker.ref()
      worker.postMessage('stop')
      await exited
    },
  }
}

/**
 * A file database's WAL, checkpointed off the writer's thread (see startWalCheckpointer); null
 * for ':memory:', which has no WAL. The writer (the connection that commits) keeps its own
 * automatic checkpoint at `writerCheckpointBytes`, and a WAL file grown past
 * `walSizeLimitBytes` is cut back to it when the WAL starts over.
 */
export function checkpointOffThread(
  writer: SqliteDatabase.Database,
  file: string,
  sizes: {
    writerCheckpointBytes: number
    walSizeLimitBytes: number
    levelAtBytes?: number
  },
): WalCheckpointer | null {
  if (file === ':memory:') return null
  const pageSize = writer.pragma('page_size', { simple: true }) as number
  const levelAtPages = sizes.levelAtBytes === undefined ? 0 : Math.ceil(sizes.levelAtBytes / pageSize)
  writer.pragma(`wal_autocheckpoint = ${Math.ceil(sizes.writerCheckpointBytes / pageSize)}`)
  writer.pragma(`journal_size_limit = ${sizes.walSizeLimitBytes}`)
  return startWalCheckpointer(file, { levelAtPages })
}

// A pass this short means the worker is close behind the writer: pausing writes for the final
// pass then costs about as long.
const SHORT_PASS_MS = 15

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const fs = require('node:fs')
const Database = require(workerData.driver)
const { everyMs, levelAtPages, shortPassMs } = workerData
// A WAL this many times the mark gets its paused pass however long the last pass was. The mark
// is reached between two routine passes, so the first pass past it finds up to a second's pages
// more (1.5x the mark at 20,000 single readings/s): that alone must not skip catching up.
const FAR_PAST = 3
const db = new Database(workerData.file)
// SQLite syncs the database file only in a checkpoint that ends level with the WAL: the paused
// pass, or the writer's own checkpoint inside a commit. Synced here after every pass, that one
// has only its own few pages left to flush: in the entity store under full ingest load, commits
// that checkpoint over 25 ms went from 7 to 2 in 90 s of logs (longest 75 and 78 ms).
const dbFile = fs.openSync(workerData.file, 'r')
const checkpoint = () => {
  try {
    const result = db.pragma('wal_checkpoint(PASSIVE)')[0]
    fs.fdatasyncSync(dbFile)
    return result
  } catch { return undefined }
}
let timer = null
let last
// Duration of the last back-to-back pass while catching up; null when not catching up.
let catchingUpMs = null
const scheduled = () => {
  const started = performance.now()
  const result = checkpoint()
  const ms = performance.now() - started
  let next = everyMs
  // Level already (nothing was written since the last pass): the next commit starts the WAL over.
  const level = result && last && result.log === last.log && result.checkpointed === result.log
  if (levelAtPages > 0 && result && result.log >= levelAtPages && !level) {
    // Catching up shortens each pass (it copies what the writer wrote during the one before),
    // until one is short. Ask for the paused pass then, or when passes stop getting shorter, or
    // when the WAL is far past the mark: waiting longer would only make the paused pass longer.
    const stalled = catchingUpMs !== null && ms >= catchingUpMs
    if (ms <= shortPassMs || stalled || result.log >= FAR_PAST * levelAtPages) {
      parentPort.postMessage('ready')
      catchingUpMs = null
    } else {
      next = 0
      catchingUpMs = ms
    }
  } else catchingUpMs = null
  last = result
  timer = setTimeout(scheduled, next)
}
timer = setTimeout(scheduled, everyMs)
parentPort.on('message', (message) => {
  if (message !== 'stop') {
    const result = checkpoint()
    last = result
    // Level: every frame is in the database file, so the writer's next commit starts the WAL over.
    parentPort.postMessage({ leveled: message.level, level: Boolean(result && result.busy === 0 && result.log === result.checkpointed) })
    return
  }
  clearTimeout(timer)
  db.close()
  process.exit(0)
})
// The descriptor is the process's, not the thread's: closed however the thread ends.
process.on('exit', () => fs.closeSync(dbFile))
`
