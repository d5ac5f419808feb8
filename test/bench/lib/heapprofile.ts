/**
 * V8's sampling heap profile (HeapProfiler.stopSampling over the inspector protocol): where the
 * bytes a phase allocated came from. Sampled with the objects the GC already collected kept in
 * (includeObjectsCollectedByMinorGC / …MajorGC), so it counts garbage, not only what survived:
 * the short-lived per-message objects that drive scavenges are what it is for.
 */

type HeapNode = {
  callFrame: { functionName: string; url: string; lineNumber: number }
  /** Bytes sampled in this frame itself (V8 scales samples to an estimate of all allocations). */
  selfSize: number
  children: HeapNode[]
}
export type HeapProfile = { head: HeapNode }

/** A package, one of our files, or a V8 pseudo-frame; as in cpuprofile.ts. */
function placeOf(url: string, functionName: string): string {
  if (!url) return functionName || '(native)'
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1]!
  if (url.startsWith('node:')) return url
  const ours = /\/((?:src|rules|broker|bench)\/.+)$/.exec(url)
  return ours ? ours[1]! : url
}

const frameName = ({ functionName, url, lineNumber }: HeapNode['callFrame']) =>
  url ? `${functionName || '(anonymous)'} ${placeOf(url, functionName)}:${lineNumber + 1}` : functionName || '(native)'

/**
 * Lines for the log: bytes allocated in all and per reading, then the top allocating functions
 * (self), the files and packages they are in, and the functions with what they called (inclusive).
 */
export function formatHeapSummary(profile: HeapProfile, readings: number, top = 25): string[] {
  const self = new Map<string, number>()
  const place = new Map<string, number>()
  const inclusive = new Map<string, number>()
  const add = (map: Map<string, number>, key: string, bytes: number) => map.set(key, (map.get(key) ?? 0) + bytes)
  const walk = (node: HeapNode, onStack: Set<string>): number => {
    const name = frameName(node.callFrame)
    add(self, name, node.selfSize)
    add(place, placeOf(node.callFrame.url, node.callFrame.functionName), node.selfSize)
    const first = !onStack.has(name)
    if (first) onStack.add(name)
    let bytes = node.selfSize
    for (const child of node.children) bytes += walk(child, onStack)
    if (first) {
      onStack.delete(name)
      add(inclusive, name, bytes)
    }
    return bytes
  }
  const total = walk(profile.head, new Set())
  const perReading = (bytes: number) => (readings > 0 ? Math.round(bytes / readings) : 0)
  const lines = [`${Math.round(total / 1e6)} MB allocated (sampled), ${perReading(total)} B per reading over ${readings} readings`]
  for (const [title, map] of [
    ['self by package/file', place],
    ['self by function', self],
    ['inclusive by function', inclusive],
  ] as const) {
    lines.push(`-- ${title} (B per reading)`)
    const rows = [...map].filter(([name]) => name !== '(root)').sort((a, b) => b[1] - a[1])
    for (const [name, bytes] of rows.slice(0, top)) lines.push(`  ${String(perReading(bytes)).padStart(7)}  ${name}`)
  }
  return lines
}
