/**
 * CPU profile of one bench phase in the service child, over the V8 inspector protocol (the child
 * runs with `--inspect=127.0.0.1:0`), so start-up and the HTTP fixture stay out of the picture.
 * The result is an ordinary .cpuprofile (opens in Chrome DevTools).
 */
import { writeFileSync } from 'node:fs'
import WebSocket from 'ws'

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
  const call = <T>(method: string, params: object = {}) => new Promise<T>((resolve, reject) => {
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
    close: () => ws.close(),
  }
}

type ProfileNode = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
type CpuProfile = { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }

/** Where a frame lives: a package, one of our files, or a V8 pseudo-frame like (garbage collector). */
function placeOf({ url, functionName }: ProfileNode['callFrame']): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1]!
  const ours = /\/((?:src|rules|broker|bench)\/.+)$/.exec(url)
  return ours ? ours[1]! : url
}

const frameOf = (n: ProfileNode) => `${n.callFrame.functionName || '(anonymous)'} ${placeOf(n.callFrame)}${n.callFrame.url ? `:${n.callFrame.lineNumber + 1}` : ''}`

/** Self time by package/file and by function, and inclusive time by function, as % of busy (non-idle) time. */
export function summarize(profile: CpuProfile, top = 25): string {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  let busy = 0
  let idle = 0
  for (const [id, us] of self) (byId.get(id)!.callFrame.functionName === '(idle)' ? (idle += us) : (busy += us))
  const add = (m: Map<string, number>, k: string, v: number) => m.set(k, (m.get(k) ?? 0) + v)
  const byPlace = new Map<string, number>()
  const byFunction = new Map<string, number>()
  for (const [id, us] of self) {
    const node = byId.get(id)!
    if (node.callFrame.functionName === '(idle)') continue
    add(byPlace, placeOf(node.callFrame), us)
    add(byFunction, frameOf(node), us)
  }
  const inclusive = new Map<string, number>()
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id)!
    const name = frameOf(node)
    const first = !onStack.has(name)
    if (first) onStack.add(name)
    let us = node.callFrame.functionName === '(idle)' ? 0 : self.get(id) ?? 0
    for (const child of node.children ?? []) us += walk(child, onStack)
    if (first) {
      onStack.delete(name)
      add(inclusive, name, us)
    }
    return us
  }
  walk(profile.nodes[0]!.id, new Set())
  // (root) and (program) are V8 bookkeeping, not code to fix; they stay in the by-place view only.
  const pseudo = (k: string) => k.startsWith('(root)') || k.startsWith('(program)')
  const rank = (m: Map<string, number>) => [...m].filter(([k]) => m === byPlace || !pseudo(k))
    .sort((a, b) => b[1] - a[1]).slice(0, top)
    .map(([k, us]) => `  ${(Math.round((us / busy) * 1_000) / 10).toFixed(1).padStart(5)}%  ${k}`).join('\n')
  return [
    `busy ${Math.round(busy / 1_000)} ms, idle ${Math.round(idle / 1_000)} ms`,
    'self time by place:', rank(byPlace),
    'self time by function:', rank(byFunction),
    'inclusive time by function:', rank(inclusive),
  ].join('\n')
}
