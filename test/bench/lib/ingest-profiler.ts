/**
 * CPU profile of one bench phase in the service child, over the V8 inspector protocol (the child
 * runs with `--inspect=127.0.0.1:0`), so start-up and the HTTP fixture stay out of the picture.
 * The result is an ordinary .cpuprofile (opens in Chrome DevTools).
 */
import { writeFileSync } from 'node:fs'
import WebSocket from 'ws'
import type { CpuProfile } from './cpuprofile.js'
import type { HeapProfile } from './heapprofile.js'

/** `node --inspect` prints "Debugger listening on ws://…" on stderr; this waits for it. */
export function inspectorUrlFrom(output: () => string, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs
  return new Promise((resolve, reject) => {
    const poll = () => {
      const match = /Debugger listening on (ws:\/\/\S+)/.exec(output())
      if (match) return resolve(match[1]!)
      if (Date.now() > deadline) return reject(new Error('the service printed no inspector URL'))
      setTimeout(poll, 50)
    }
    poll()
  })
}

export async function connectProfiler(url: string) {
  const ws = new WebSocket(url)
  await new Promise((resolve, reject) => {
    ws.once('open', resolve)
    ws.once('error', reject)
  })
  let nextId = 1
  const pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
  ws.on('message', (data) => {
    const message = JSON.parse(data.toString()) as { id?: number; result?: unknown; error?: { message: string } }
    const waiter = message.id === undefined ? undefined : pending.get(message.id)
    if (!waiter) return
    pending.delete(message.id!)
    if (message.error) waiter.reject(new Error(message.error.message))
    else waiter.resolve(message.result)
  })
  const call = <T>(method: string, params: object = {}) =>
    new Promise<T>((resolve, reject) => {
      const id = nextId++
      pending.set(id, { resolve: resolve as (v: unknown) => void, reject })
      ws.send(JSON.stringify({ id, method, params }))
    })
  await call('Profiler.enable')
  await call('Profiler.setSamplingInterval', { interval: 500 }) // µs; 2 kHz is plenty for hotspots
  return {
    start: () => call('Profiler.start'),
    /** Stops sampling, writes the profile to `file` and returns it. */
    async stop(file: string): Promise<CpuProfile> {
      const { profile } = await call<{ profile: CpuProfile }>('Profiler.stop')
      writeFileSync(file, JSON.stringify(profile))
      return profile
    },
    /** Sampling heap profile, with the objects collected since kept in (heapprofile.ts). */
    startHeap: async () => {
      await call('HeapProfiler.enable')
      await call('HeapProfiler.startSampling', {
        samplingInterval: 16_384,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      })
    },
    async stopHeap(file: string): Promise<HeapProfile> {
      const { profile } = await call<{ profile: HeapProfile }>('HeapProfiler.stopSampling')
      writeFileSync(file, JSON.stringify(profile))
      return profile
    },
    close: () => ws.close(),
  }
}
