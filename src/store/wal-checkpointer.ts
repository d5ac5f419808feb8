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
  /**
   * True while the WAL is past `levelAtPages` and not yet leveled, as the worker's last pass
   * found it: checkpoints are not keeping up with the writer (a slow disk, or a burst). Work that
   * can wait, such as expiry, waits, so its pages do not push the WAL on to the writer's own
   * checkpoint, which runs inside a commit (docs/performance.md, bench:expiry).
   */
  readonly behind: boolean
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

/** What wal-checkpoint-worker.js is started with. */
export type WalWorkerData = { file: string; everyMs: number; levelAtPages: number; shortPassMs: number }
/** A leveling request (its id), or stop. */
export type ToWalWorker = { level: number } | 'stop'
/**
 * `ready`: the WAL is past the mark and a paused pass would be short; `behind`: whether the WAL is
 * past the mark (told when it changes); or the answer to a leveling request.
 */
export type FromWalWorker = 'ready' | { behind: boolean } | { leveled: number; level: boolean }

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
 * The worker is wal-checkpoint-worker.js: plain JavaScript (type-checked), because a worker
 * thread on Node 20 gets none of tsx's hooks and could not load TypeScript.
 */
export function startWalCheckpointer(file: string, options: WalCheckpointerOptions = {}): WalCheckpointer {
  const { levelAtPages = 0, everyMs = CHECKPOINT_EVERY_MS, levelTimeoutMs = LEVEL_TIMEOUT_MS } = options
  const workerData: WalWorkerData = { file, everyMs, levelAtPages, shortPassMs: SHORT_PASS_MS }
  const worker = new Worker(new URL('./wal-checkpoint-worker.js', import.meta.url), { workerData })
  const tell = (message: ToWalWorker) => worker.postMessage(message)
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
  let behind = false
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
  worker.on('message', (message: FromWalWorker) => {
    if (message === 'ready') levelWanted = leveling === null && Date.now() >= ignoreReadyUntil
    else if ('behind' in message) behind = message.behind
    else if (message.leveled === leveling?.id) finishLeveling(message.level) // a late answer to a timed-out request is ignored
  })
  worker.unref()
  return {
    get levelWanted() {
      return levelWanted
    },
    get behind() {
      return behind && !gone
    },
    level() {
      levelWanted = false
      if (gone) return Promise.resolve()
      if (!leveling) {
        const id = ++requests
        let resolve!: () => void
        const done = new Promise<void>((r) => (resolve = r))
        leveling = { id, done, resolve, timeout: setTimeout(() => finishLeveling(false), levelTimeoutMs) }
        tell({ level: id })
      }
      return leveling.done
    },
    async stop() {
      stopping = true
      // Referenced again while it stops, or a process with nothing else to do would end before
      // this resolves (and skip whatever follows the close, such as an error message).
      worker.ref()
      tell('stop')
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
