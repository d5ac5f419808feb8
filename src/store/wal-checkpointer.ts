import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'

// Often enough that the WAL stays short between the request connection's own checkpoints,
// rarely enough that each pass copies many versions of the same hot pages at once.
const CHECKPOINT_EVERY_MS = 1_000

/**
 * Moves nearly all of SQLite's WAL checkpoint work off the event loop. SQLite's automatic
 * checkpoint runs inside the commit that crosses its threshold (1,000 pages by default, about
 * 50 creates), on the connection that commits: it copies those pages into the database file
 * and fsyncs it, stalling every request for milliseconds. Here a worker thread with its own
 * connection runs a PASSIVE checkpoint (it never waits for, nor blocks, the writer) every
 * second, and the request connection's own threshold is raised (`REQUEST_CONNECTION_AUTOCHECKPOINT_PAGES`).
 *
 * Why the request connection still checkpoints at all: under steady writes a PASSIVE
 * checkpoint from another connection never catches up with the writer, and SQLite restarts
 * the WAL from its start only after a checkpoint that did. The request connection's rare
 * automatic checkpoint runs right after its own commit, when nothing else is writing; the
 * worker has already copied all but the last second's pages, so it is short.
 * Durability does not change: a commit is durable when it is in the WAL (synchronous = NORMAL).
 *
 * The worker is a few lines of plain JavaScript evaluated in the thread, so it loads the same
 * better-sqlite3 as the service whether the service runs from TypeScript (tsx) or compiled.
 */
export function startWalCheckpointer(file: string): { stop(): Promise<void> } {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver, file, everyMs: CHECKPOINT_EVERY_MS } })
  // A failed pass changes nothing: the next one, or the request connection's, copies the pages.
  worker.on('error', () => {})
  // Listened for from the start: a worker that already died must not leave stop() waiting.
  const exited = new Promise((resolve) => worker.once('exit', resolve))
  worker.unref()
  return {
    async stop() {
      // Referenced again while it stops, or a process with nothing else to do would end before
      // this resolves (and skip whatever follows the close, such as an error message).
      worker.ref()
      worker.postMessage('stop')
      await exited
    },
  }
}

// 16,384 pages of 4 KiB = 64 MiB of WAL, about 800 creates (~20 pages each).
export const REQUEST_CONNECTION_AUTOCHECKPOINT_PAGES = 16_384

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file)
const checkpoint = () => { try { db.pragma('wal_checkpoint(PASSIVE)') } catch {} }
const timer = setInterval(checkpoint, workerData.everyMs)
parentPort.on('message', () => {
  clearInterval(timer)
  db.close()
  process.exit(0)
})
`
