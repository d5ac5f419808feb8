/**
 * The thread behind `createThreadedSqliteSink` (sqlite-sink-thread.ts): it owns the readings
 * file's connection (an ordinary `createSqliteSink`) and answers the main thread's requests one
 * at a time, in the order they were sent.
 */
import { parentPort, workerData } from 'node:worker_threads'
import { decodeRows, type Reply, type Request } from './sqlite-sink-protocol.js'
import { createSqliteSink } from './sqlite-sink.js'
import type { ReadingSink } from './sink.js'

const port = parentPort!
const { path } = workerData as { path: string }

let sink: ReadingSink
try {
  sink = createSqliteSink({ path })
  port.postMessage({ id: 0, ok: true, value: null } satisfies Reply)
} catch (err) {
  port.postMessage({ id: 0, ok: false, error: errorOf(err) } satisfies Reply)
  process.exit(1)
}

function errorOf(err: unknown): { name: string; message: string; code?: string } {
  const e = err instanceof Error ? err : new Error(String(err))
  const code = (e as { code?: unknown }).code
  return { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}) }
}

async function answer(request: Request): Promise<unknown> {
  switch (request.op) {
    case 'write': return sink.write(decodeRows(request.rows))
    case 'readingsForDelivery': return sink.readingsForDelivery(...request.args)
    case 'bucketed': return sink.bucketed(...request.args)
    case 'readingsForTote': return sink.readingsForTote(...request.args)
    case 'count': return sink.count()
    case 'close': return sink.close()
  }
}

port.on('message', (request: Request) => {
  // The sink's methods do their work synchronously, so requests are answered in order.
  answer(request).then(
    (value) => {
      port.postMessage({ id: request.id, ok: true, value: value ?? null } satisfies Reply)
      if (request.op === 'close') port.close()
    },
    (err: unknown) => port.postMessage({ id: request.id, ok: false, error: errorOf(err) } satisfies Reply),
  )
})
