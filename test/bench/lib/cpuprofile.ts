import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

/** The parts of V8's .cpuprofile (written by `node --cpu-prof`) that a summary needs. */
type ProfileNode = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; children?: number[] }
export type CpuProfile = { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] }

export type Hotspot = { name: string; ms: number; pct: number }
export type ProfileSummary = {
  profiled_ms: number
  idle_pct: number
  self_by_function: Hotspot[]
  self_by_place: Hotspot[]
  inclusive_by_function: Hotspot[]
}

/** Where a frame comes from: a package, one of our files, or a V8 pseudo-frame such as (garbage collector). */
function placeOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith('(') ? functionName : '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1]!
  if (url.startsWith('node:')) return url
  const ours = /\/((?:src|rules|broker|bench)\/.+)$/.exec(url)
  return ours ? ours[1]! : url
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame
  const place = placeOf(url, functionName)
  return url ? `${functionName || '(anonymous)'} ${place}:${lineNumber + 1}` : functionName || place
}

/**
 * Self time (where the CPU was) per function and per package or file, and inclusive time
 * (the function and everything it called) per function: the usual two views of a profile.
 */
function summarizeProfile(file: string, top = 20): ProfileSummary {
  return summarize(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, top)
}

/** The same for a profile already in memory (e.g. one taken over the inspector protocol). */
export function summarize(profile: CpuProfile, top = 20): ProfileSummary {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const selfUs = new Map<number, number>()
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const totalUs = profile.timeDeltas.reduce((a, b) => a + b, 0)
  const idleUs = [...selfUs].filter(([id]) => byId.get(id)?.callFrame.functionName === '(idle)').reduce((a, [, us]) => a + us, 0)

  const bucket = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us)
  const selfByFunction = new Map<string, number>()
  const selfByPlace = new Map<string, number>()
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!
    bucket(selfByFunction, frameName(node), us)
    bucket(selfByPlace, placeOf(node.callFrame.url, node.callFrame.functionName), us)
  }

  // Inclusive time: a node's self time plus its subtree's; a function on the stack twice (recursion) counts once.
  const inclusive = new Map<string, number>()
  const walk = (id: number, onStack: Set<string>): number => {
    const node = byId.get(id)!
    const name = frameName(node)
    const first = !onStack.has(name)
    if (first) onStack.add(name)
    let us = selfUs.get(id) ?? 0
    for (const child of node.children ?? []) us += walk(child, onStack)
    if (first) {
      onStack.delete(name)
      bucket(inclusive, name, us)
    }
    return us
  }
  walk(profile.nodes[0]!.id, new Set())

  const busyUs = totalUs - idleUs
  const rank = (map: Map<string, number>, skip: (name: string) => boolean = () => false): Hotspot[] =>
    [...map]
      .filter(([name]) => !skip(name))
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([name, us]) => ({ name, ms: Math.round(us / 1_000), pct: Math.round((us / busyUs) * 1_000) / 10 }))
  const pseudo = (name: string) => name.startsWith('(') // (root), (program), (idle): not code of ours to fix
  return {
    profiled_ms: Math.round(totalUs / 1_000),
    idle_pct: Math.round((idleUs / totalUs) * 1_000) / 10,
    self_by_function: rank(selfByFunction, (n) => n === '(idle)'),
    self_by_place: rank(selfByPlace, (n) => n === '(idle)'),
    inclusive_by_function: rank(inclusive, pseudo),
  }
}

/** The summary as text lines: the header, then the three views, % of busy time first. */
export function formatSummary(summary: ProfileSummary): string[] {
  const lines = [`${summary.profiled_ms} ms profiled, ${summary.idle_pct}% idle; % of busy time below`]
  for (const [title, rows] of [
    ['self time by package/file', summary.self_by_place],
    ['self time by function', summary.self_by_function],
    ['inclusive time by function', summary.inclusive_by_function],
  ] as const) {
    lines.push(`-- ${title}`)
    for (const row of rows) lines.push(`  ${String(row.pct).padStart(5)}%  ${String(row.ms).padStart(7)} ms  ${row.name}`)
  }
  return lines
}

/**
 * Logs the hotspots of the service's event loop from a `node --cpu-prof` directory, and one
 * line for each other thread. Files are `CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile`:
 * thread 0, sorted first, is the event loop; the others are workers (tsx, sinks).
 */
export function logServiceProfile(dir: string, log: (line: string) => void, top = 25): void {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .sort()
  if (files.length === 0) {
    log(`no .cpuprofile was written in ${dir}`)
    return
  }
  for (const file of files.slice(1)) log(`other thread: ${join(dir, file)} (${summarizeProfile(join(dir, file), 1).profiled_ms} ms)`)
  const main = join(dir, files[0]!)
  log(`profile ${main}:`)
  for (const line of formatSummary(summarizeProfile(main, top))) log(line)
}
