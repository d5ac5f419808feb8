// @ts-check
// The thread startWalCheckpointer (wal-checkpointer.ts) runs. Plain JavaScript, type-checked by
// tsc (checkJs): Node 20 worker threads load it without a TypeScript loader (tsx's hooks do not
// reach them), whether the service runs from TypeScript or compiled.
import fs from 'node:fs'
import { parentPort, workerData } from 'node:worker_threads'
import Database from 'better-sqlite3'

/** @typedef {import('./wal-checkpointer.js').WalWorkerData} WalWorkerData */
/** @typedef {import('./wal-checkpointer.js').ToWalWorker} ToWalWorker */
/** @typedef {import('./wal-checkpointer.js').FromWalWorker} FromWalWorker */
/** @typedef {{ busy: number; log: number; checkpointed: number }} CheckpointResult */

if (parentPort === null) throw new Error('wal-checkpoint-worker.js runs as a worker thread')
const port = parentPort
const { file, everyMs, levelAtPages, shortPassMs } = /** @type {WalWorkerData} */ (workerData)
/** @param {FromWalWorker} message */
const tell = (message) => port.postMessage(message)

// A WAL this many times the mark gets its paused pass however long the last pass was. The mark
// is reached between two routine passes, so the first pass past it finds up to a second's pages
// more (1.5x the mark at 20,000 single readings/s): that alone must not skip catching up.
const FAR_PAST = 3
const db = new Database(file)
// SQLite syncs the database file only in a checkpoint that ends level with the WAL: the paused
// pass, or the writer's own checkpoint inside a commit. Synced here after every pass, that one
// has only its own few pages left to flush: in the entity store under full ingest load, commits
// that checkpoint over 25 ms went from 7 to 2 in 90 s of logs (longest 75 and 78 ms).
const dbFile = fs.openSync(file, 'r')
/** @returns {CheckpointResult | undefined} undefined when the pass failed: the next one, or the writer's own, copies the pages */
const checkpoint = () => {
  try {
    const result = /** @type {CheckpointResult[]} */ (db.pragma('wal_checkpoint(PASSIVE)'))[0]
    fs.fdatasyncSync(dbFile)
    return result
  } catch {
    return undefined
  }
}
/** @type {NodeJS.Timeout | undefined} */
let timer
/** @type {CheckpointResult | undefined} */
let last
/** Duration of the last back-to-back pass while catching up; null when not catching up. @type {number | null} */
let catchingUpMs = null
/** Whether the writer was last told the WAL is past the mark. */
let toldBehind = false
const scheduled = () => {
  const started = performance.now()
  const result = checkpoint()
  const ms = performance.now() - started
  let next = everyMs
  // Level already (nothing was written since the last pass): the next commit starts the WAL over.
  const level = result && last && result.log === last.log && result.checkpointed === result.log
  const behind = levelAtPages > 0 && result !== undefined && result.log >= levelAtPages && !level
  if (behind !== toldBehind) tell({ behind: (toldBehind = behind) })
  if (behind) {
    // Catching up shortens each pass (it copies what the writer wrote during the one before),
    // until one is short. Ask for the paused pass then, or when passes stop getting shorter, or
    // when the WAL is far past the mark: waiting longer would only make the paused pass longer.
    const stalled = catchingUpMs !== null && ms >= catchingUpMs
    if (ms <= shortPassMs || stalled || result.log >= FAR_PAST * levelAtPages) {
      tell('ready')
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
port.on('message', (/** @type {ToWalWorker} */ message) => {
  if (message !== 'stop') {
    const result = checkpoint()
    last = result
    // Level: every frame is in the database file, so the writer's next commit starts the WAL over,
    // and the WAL is no longer behind (told first: the writer reads it once level() resolves).
    const level = Boolean(result && result.busy === 0 && result.log === result.checkpointed)
    if (level && toldBehind) tell({ behind: (toldBehind = false) })
    tell({ leveled: message.level, level })
    return
  }
  clearTimeout(timer)
  db.close()
  process.exit(0)
})
// The descriptor is the process's, not the thread's: closed however the thread ends.
process.on('exit', () => fs.closeSync(dbFile))
