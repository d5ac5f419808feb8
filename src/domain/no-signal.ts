import type { TraceExcursion } from './temperature-trace.js'

/**
 * The "no signal" (unknown) intervals of a trace as a pharmacist reads them: sorted, disjoint and
 * each at least a second long. The rule engine's closed gaps, its open one and the silence since
 * the newest reading can overlap or touch; one silence is one interval. Intervals shorter than a
 * second are dropped: sensors report every few seconds at most, so such a sliver is rounding
 * between two accounts of one gap, not a silence anyone can act on.
 *
 * Other excursions (too warm, too cold) are kept as they are. The result is oldest first.
 */
export function mergeNoSignal(excursions: readonly TraceExcursion[]): TraceExcursion[] {
  const others = excursions.filter((e) => e.kind !== 'unknown')
  // `reach`: how far the interval is known to run (its end, or for an open one, as far as its duration goes).
  const silences = excursions
    .filter((e) => e.kind === 'unknown')
    .map((e) => {
      const from = Date.parse(e.started_at)
      return { from, to: e.ended_at === null ? null : Date.parse(e.ended_at), reach: from + e.duration_s * 1_000 }
    })
    .sort((a, b) => a.from - b.from)

  const merged: typeof silences = []
  for (const s of silences) {
    const last = merged.at(-1)
    if (last && (last.to === null || s.from <= last.to)) {
      last.to = last.to === null || s.to === null ? null : Math.max(last.to, s.to)
      last.reach = Math.max(last.reach, s.reach)
    } else {
      merged.push({ ...s })
    }
  }

  const kept = merged
    .map((s) => ({ ...s, durationMs: (s.to ?? s.reach) - s.from }))
    .filter((s) => s.durationMs >= MIN_SILENCE_MS)
    .map((s): TraceExcursion => ({
      started_at: new Date(s.from).toISOString(),
      ended_at: s.to === null ? null : new Date(s.to).toISOString(),
      duration_s: s.durationMs / 1_000,
      peak_c: null,
      kind: 'unknown',
    }))
  return [...others, ...kept].sort((a, b) => Date.parse(a.started_at) - Date.parse(b.started_at))
}

/** Below this a silence is rounding between two accounts of one gap (see mergeNoSignal). */
const MIN_SILENCE_MS = 1_000

/**
 * Silences between the trace's points: where no reading came for longer than `maxGapMs`, the
 * time past it is unknown (as the rule engine counts it). Points are buckets, so a reading is
 * known to within a step; these intervals start at the later edge of the last bucket. They are
 * the short gaps the rule engine does not list as excursions (within grace_s) as well as the long
 * ones it does; mergeNoSignal makes one interval of each silence.
 */
export function silencesBetweenPoints(pointStartsMs: readonly number[], stepMs: number, maxGapMs: number): TraceExcursion[] {
  const silences: TraceExcursion[] = []
  for (let i = 1; i < pointStartsMs.length; i++) {
    const unknownFrom = pointStartsMs[i - 1]! + stepMs + maxGapMs
    const until = pointStartsMs[i]!
    if (until > unknownFrom) {
      silences.push({
        started_at: new Date(unknownFrom).toISOString(),
        ended_at: new Date(until).toISOString(),
        duration_s: (until - unknownFrom) / 1_000,
        peak_c: null,
        kind: 'unknown',
      })
    }
  }
  return silences
}
