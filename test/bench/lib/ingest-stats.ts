import { readdirSync, readFileSync } from 'node:fs'
import type { PhaseResult } from './ingest-protocol.js'

/** Latencies in ms, appended without reallocating one huge array per sample. */
export class LatencySamples {
  private chunks: Float64Array[] = []
  private current = new Float64Array(65_536)
  private used = 0

  add(ms: number): void {
    if (this.used === this.current.length) {
      this.chunks.push(this.current)
      this.current = new Float64Array(65_536)
      this.used = 0
    }
    this.current[this.used++] = ms
  }

  get count(): number {
    return this.chunks.length * 65_536 + this.used
  }

  /** Nearest-rank percentiles (p in 0..100) of everything added. */
  percentiles(ps: readonly number[]): number[] {
    const all = new Float64Array(this.count)
    let at = 0
    for (const c of this.chunks) {
      all.set(c, at)
      at += c.length
    }
    all.set(this.current.subarray(0, this.used), at)
    all.sort()
    return ps.map((p) => percentileOfSorted(all, p))
  }
}

function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))
  return sorted[rank]!
}

/** Nearest-rank percentile of a plain array (sorted here). */
export function percentile(values: readonly number[], p: number): number {
  return percentileOfSorted(Float64Array.from(values).sort(), p)
}

export const round = (x: number, digits = 1): number => {
  const f = 10 ** digits
  return Math.round(x * f) / f
}

/** What a publisher phase delivered and how fast it was acknowledged, as the benchmarks print it. */
export const pubackFigures = (r: PhaseResult) => ({
  readings_per_s: round(r.ackedReadings / (r.elapsedMs / 1_000), 0),
  puback_p50_ms: round(r.latency.p50, 2),
  puback_p99_ms: round(r.latency.p99, 2),
  puback_max_ms: round(r.latency.max, 1),
  errors: r.errors + r.rejected,
  behind: r.behind,
})

/** Resident set size of a process in MB, from /proc/<pid>/status (Linux). Null once it is gone. */
export function rssMb(pid: number): number | null {
  try {
    const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return match ? round(Number(match[1]) / 1024, 0) : null
  } catch {
    return null
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat. */
export function cpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    // Fields 14 and 15 of proc(5) (utime, stime), counted from after the command name; USER_HZ is 100 on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return null
  }
}

/**
 * Busy CPU seconds of the whole machine, every core (user, system, interrupts, steal; not idle or
 * iowait), from /proc/stat: what every process of a run, PostgreSQL and the kernel's network
 * processing included, took from the cores they share.
 */
export function machineBusySeconds(): number {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const [user, nice, system, , , irq, softirq, steal] = cpu as [number, number, number, number, number, number, number, number]
  return (user + nice + system + irq + softirq + steal) / 100
}

/**
 * CPU seconds that the processes named `name` (say, PostgreSQL's backends, which serve every copy)
 * use from now until stop(). Sampled every `everyMs`, so a backend that exits meanwhile (a pool
 * closing an idle connection) keeps what it had used by its last sample.
 */
export function watchCpuOf(name: string, everyMs = 250) {
  const start = new Map<number, number>()
  const last = new Map<number, number>()
  const sample = (baseline: boolean) => {
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue
      const pid = Number(entry)
      try {
        if (!last.has(pid) && readFileSync(`/proc/${pid}/comm`, 'utf8').trim() !== name) continue
      } catch {
        continue // gone meanwhile
      }
      const cpu = cpuSeconds(pid)
      if (cpu === null) continue
      if (!start.has(pid)) start.set(pid, baseline ? cpu : 0)
      last.set(pid, cpu)
    }
  }
  sample(true)
  const timer = setInterval(() => sample(false), everyMs)
  return {
    stop(): number {
      clearInterval(timer)
      sample(false)
      let sum = 0
      for (const [pid, cpu] of last) sum += cpu - start.get(pid)!
      return sum
    },
  }
}

/** Samples a process's RSS every `everyMs` and keeps the peak, until stopped. */
export function watchRss(pid: number, everyMs = 250) {
  let peak = rssMb(pid) ?? 0
  const timer = setInterval(() => {
    const now = rssMb(pid)
    if (now !== null && now > peak) peak = now
  }, everyMs)
  timer.unref()
  return {
    peak: () => peak,
    stop(): number {
      clearInterval(timer)
      const now = rssMb(pid)
      if (now !== null && now > peak) peak = now
      return peak
    },
  }
}
