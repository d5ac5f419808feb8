import { Worker } from 'node:worker_threads'
import { assertStep, type ReadingSink } from './sink.js'
import { encodeRows, type Reply, type Request } from './sqlite-sink-protocol.js'

/**
 * The SQLite sink (sqlite-sink.ts) on a thread of its own: the same file, schema and writes, but
 * the inserts, commits and the writer's checkpoints run beside the event loop instead of on it.
 *
 * Why: with 1,000 totes sending single readings, every reading dirties its own index page, and
 * the commits took a fifth to a third of the event loop's time (~12 µs per reading) in one
 * piece per group: every MQTT packet and HTTP request waited behind them, and PUBACK p99 grew
 * with the group. Here the event loop only encodes the rows (a Float64Array, transferred) and
 * resumes; the group's publishes are acknowledged when the thread says it committed, so the
 * PUBACK still means "stored" (SPEC §4).
 *
 * Requests are answered in the order they were sent. If the thread dies, every request in flight
 * and every later one fails (the publishes are not acknowledged; the tote sends them again).
 */
export async function createThreadedSqliteSink({ path }: { path: string }): Promise<ReadingSink> {
  const worker = startWorker(path)
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>()
  let nextId = 1
  let failure: Error | null = null

  const failAll = (error: Error) => {
    failure ??= error
    for (const p of pending.values()) p.reject(error)
    pending.clear()
  }

  const ready = new Promise<void>((resolve, reject) => pending.set(0, { resolve: () => resolve(), reject }))
  worker.on('message', (reply: Reply) => {
    const waiter = pending.get(reply.id)
    if (waiter === undefined) return
    pending.delete(reply.id)
    if (reply.ok) waiter.resolve(reply.value)
    else waiter.reject(errorFrom(reply.error))
  })
  worker.on('error', (err) => failAll(new Error(`readings writer thread failed: ${err.message}`)))
  const exited = new Promise<void>((resolve) => worker.once('exit', (code) => {
    failAll(new Error(`readings writer thread exited (code ${code})`))
    resolve()
  }))
  await ready
  // From now on like a socket: it keeps nothing alive by itself; close() holds the process until it is done.
  worker.unref()

  const call = <T>(request: Request, transfer: ArrayBuffer[] = []): Promise<T> => {
    if (failure) return Promise.reject(failure)
    return new Promise<T>((resolve, reject) => {
      pending.set(request.id, { resolve: resolve as (value: unknown) => void, reject })
      worker.postMessage(request, transfer)
    })
  }

  return {
    async write(rows) {
      if (rows.length === 0) return
      const encoded = encodeRows(rows)
      await call({ id: nextId++, op: 'write', rows: encoded }, [encoded.numbers.buffer as ArrayBuffer])
    },
    readingsForDelivery: (...args) => call({ id: nextId++, op: 'readingsForDelivery', args }),
    async bucketed(...args) {
      assertStep(args[3]) // a RangeError callers can tell apart, without a round trip
      return call({ id: nextId++, op: 'bucketed', args })
    },
    readingsForTote: (...args) => call({ id: nextId++, op: 'readingsForTote', args }),
    count: () => call({ id: nextId++, op: 'count' }),
    async close() {
      if (failure) return exited
      worker.ref()
      await call({ id: nextId++, op: 'close' })
      await exited
    },
  }
}

/** The thread's error as this thread's: same class for the built-in ones, same message and code. */
function errorFrom({ name, message, code }: { name: string; message: string; code?: string }): Error {
  const Class = name === 'RangeError' ? RangeError : name === 'TypeError' ? TypeError : Error
  const error = new Class(message)
  if (Class === Error && name !== 'Error') error.name = name
  return code === undefined ? error : Object.assign(error, { code })
}

/**
 * The worker runs sqlite-sink-worker.ts. Compiled, that is a .js file Node loads as is; run from
 * TypeScript (tsx, vitest), a worker does not inherit the loader, so it loads tsx's API first
 * and imports the .ts file through it.
 */
function startWorker(path: string): Worker {
  const ts = import.meta.url.endsWith('.ts')
  const entry = new URL(`./sqlite-sink-worker.${ts ? 'ts' : 'js'}`, import.meta.url)
  if (!ts) return new Worker(entry, { workerData: { path } })
  const api = import.meta.resolve('tsx/esm/api')
  const code = `import(${JSON.stringify(api)}).then((tsx) => tsx.tsImport(${JSON.stringify(entry.href)}, ${JSON.stringify(entry.href)}))`
  return new Worker(code, { eval: true, workerData: { path } })
}
