import { Worker } from 'node:worker_threads'

/**
 * The thread password hashes run on: one worker thread at a lower CPU priority (nice), so a
 * sign-in's scrypt never competes on equal terms with the event loop, the MQTT broker or the
 * store's checkpointer for a core.
 *
 * On libuv's thread pool (node:crypto's async scrypt) a hash takes a whole core at the same
 * priority as everything else: on a 2-core machine, whenever the event loop and another task
 * (the checkpointer, a neighbour process) are runnable at once, the scheduler shares a core
 * between them and PUBACKs and requests wait their turn behind 0.1–0.4 s hashes. A thread with a
 * higher nice value gets a core whenever one is idle and yields it at once when normal-priority
 * work wakes up. Linux keeps nice per thread, so `setPriority` in the worker lowers only its own.
 *
 * Hashes run one at a time (the worker takes its messages in order and scryptSync blocks it):
 * several at once would hold 32 MiB each and take every core. Sign-ins queue instead, and the
 * per-account and per-address throttles bound that queue.
 */

// Priority 10 of 19: scheduled about a tenth as often as normal work when both want the same
// core, and still a whole idle core's worth when nothing else runs.
const HASHING_NICE = 10

export type ScryptJob = { password: string; salt: Buffer; keyBytes: number; N: number; r: number; p: number; maxmem: number }

type Pending = { resolve: (key: Buffer) => void; reject: (error: Error) => void }
type Queued = Pending & { id: number; job: ScryptJob }

/**
 * `signature`: a person waiting at a signing dialog, ahead of every queued sign-in (a burst of
 * 20 sign-ins queues ~3 s of hashes; a signature must not wait behind them, docs/performance.md).
 */
export type HashPriority = 'sign-in' | 'signature'
type Answer = { id: number; key?: Uint8Array; error?: string }

// Plain JavaScript evaluated in the thread: it runs the same whether the service runs from
// TypeScript (tsx, vitest) or compiled.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads')
const { scryptSync } = require('node:crypto')
const { setPriority } = require('node:os')
try { setPriority(workerData.nice) } catch {} // not allowed (a sandbox): hash at normal priority
parentPort.on('message', ({ id, password, salt, keyBytes, N, r, p, maxmem }) => {
  try {
    const key = scryptSync(password, salt, keyBytes, { N, r, p, maxmem })
    parentPort.postMessage({ id, key })
  } catch (error) {
    parentPort.postMessage({ id, error: error instanceof Error ? error.message : String(error) })
  }
})
`

export class HashingThread {
  private worker: Worker | null = null
  private readonly pending = new Map<number, Pending>()
  // Jobs wait here, not in the thread's message queue, so a signature can go ahead of queued sign-ins.
  private readonly queues: Record<HashPriority, Queued[]> = { signature: [], 'sign-in': [] }
  private nextId = 0

  /** `nice`: the thread's CPU priority (passwords.ts: sign-ins at 10, signatures on a thread of their own at 0). */
  constructor(private readonly nice: number = HASHING_NICE) {}

  /** scrypt (RFC 7914) on the hashing thread; rejects with scrypt's error (bad parameters) or if the thread died. */
  scrypt(job: ScryptJob, priority: HashPriority = 'sign-in'): Promise<Buffer> {
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.queues[priority].push({ id, job, resolve, reject })
      this.next()
    })
  }

  /** Hands the thread the next job when it has none: signatures first, then sign-ins, each in arrival order. */
  private next(): void {
    if (this.pending.size > 0) return
    const queued = this.queues.signature.shift() ?? this.queues['sign-in'].shift()
    if (!queued) return
    const worker = this.thread()
    // While a hash is pending the thread keeps the process alive (a CLI command waits for it).
    worker.ref()
    this.pending.set(queued.id, queued)
    worker.postMessage({ id: queued.id, ...queued.job })
  }

  private thread(): Worker {
    if (this.worker) return this.worker
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { nice: this.nice } })
    worker.on('message', ({ id, key, error }: Answer) => {
      const waiter = this.pending.get(id)
      this.pending.delete(id)
      if (this.pending.size === 0) worker.unref()
      if (waiter) {
        if (key) waiter.resolve(Buffer.from(key.buffer, key.byteOffset, key.byteLength))
        else waiter.reject(new Error(error ?? 'scrypt failed'))
      }
      this.next()
    })
    // A thread that died (out of memory) fails what it held; the next hash starts a new one.
    const lost = (error: Error) => {
      if (this.worker !== worker) return
      this.worker = null
      for (const waiter of this.pending.values()) waiter.reject(error)
      this.pending.clear()
      this.next() // what is still queued goes to a new thread
    }
    worker.on('error', lost)
    worker.on('exit', (code) => lost(new Error(`the password hashing thread exited (code ${code})`)))
    // An idle hashing thread must not keep the process alive.
    worker.unref()
    this.worker = worker
    return worker
  }
}
