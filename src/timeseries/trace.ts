import { roundCelsius } from '../../rules/events.js'
import { iso } from '../clock.js'
import { parseDuration } from '../config.js'
import type { ColdChain } from '../domain/cold-chain.js'
import { mergeNoSignal, silencesBetweenPoints } from '../domain/no-signal.js'
import type { TemperatureTrace, TraceExcursion, TracePoint, TraceSummary } from '../domain/temperature-trace.js'
import { validationFailed } from '../errors.js'
import type { ReadingSink } from './sink.js'

/**
 * The pharmacist's temperature trace of one delivery: the readings in steps, the
 * excursions and the summary the rule engine keeps in the delivery's `cold_chain` block.
 *
 * Window: `from` defaults to the start of the tote's binding (the `dispatched` custody event, or
 * the delivery's creation), `to` to the end of the delivery (its DELIVERED/RETURNED/CANCELLED
 * custody event) or now. When the window is the whole delivery, the summary is the stored one.
 * When it is narrower, `min_c`/`max_c` are those of the points in the window (`scope: "window"`),
 * while `mkt_c` and `time_out_of_range_s` stay the whole delivery's — MKT and the excursion
 * budget are judged over the whole trip — and only the excursions overlapping the window are
 * listed.
 */

export type TraceQuery = { from?: string | undefined; to?: string | undefined; step?: string | undefined }

export type TraceWindow = {
  fromMs: number
  toMs: number
  stepMs: number
  /** The window covers the whole delivery, so the stored summary applies as it is. */
  whole: boolean
  /** The wall clock when the trace was asked for. */
  nowMs: number
  /** No `to` was given and the delivery is open: the window ends at "as of" (now, or the newest reading). */
  openEnded: boolean
}

/** Readings are accepted up to this far ahead of the wall clock (docs/api.md, Telemetry): an open window reads that far. */
const FUTURE_TOLERANCE_MS = 5 * 60_000

export type { TemperatureTrace, TraceExcursion, TracePoint, TraceSummary }

/** Beyond this a chart or a spreadsheet is no longer read by a person; ask for a larger step. */
export const MAX_POINTS = 10_000
/** Sensors report every few seconds at most; a finer step only repeats single readings. */
const MIN_STEP_MS = 1_000
export const DEFAULT_STEP = '60s'

const ENDING_CUSTODY = new Set(['delivered', 'returned', 'cancelled'])

/** What a trace reads of a delivery; the API's delivery has these fields (timeseries/ does not import services/). */
export type TracedDelivery = {
  id: string
  rx_id: string
  created_at: string
  custody: readonly { type: string; occurred_at: string }[]
  cold_chain: Pick<ColdChain, 'required' | 'profile' | 'excursions' | 'min_c' | 'max_c' | 'mkt_c' | 'time_out_of_range_s' | 'unknown_s'>
}

/** Where the tote's binding starts and the delivery ends (null while open). */
function deliverySpan(delivery: TracedDelivery): { startMs: number; endMs: number | null } {
  const dispatched = delivery.custody.find((e) => e.type === 'dispatched')
  const ended = [...delivery.custody].reverse().find((e) => ENDING_CUSTODY.has(e.type))
  return {
    startMs: Date.parse(dispatched?.occurred_at ?? delivery.created_at),
    endMs: ended ? Date.parse(ended.occurred_at) : null,
  }
}

/** Resolves and checks the query's window; a bad value is a 422 naming the query parameter. */
export function traceWindow(delivery: TracedDelivery, query: TraceQuery, nowMs: number): TraceWindow {
  const span = deliverySpan(delivery)
  const defaultTo = span.endMs ?? nowMs
  const stepMs = parseStep(query.step ?? DEFAULT_STEP)
  const fromMs = query.from ? Date.parse(query.from) : span.startMs
  const toMs = query.to ? Date.parse(query.to) : Math.max(defaultTo, fromMs)
  if (toMs < fromMs) throw validationFailed([{ pointer: '/query/to', message: 'must not be before from' }])
  const points = bucketCount(fromMs, toMs, stepMs)
  if (points > MAX_POINTS) {
    throw validationFailed([
      {
        pointer: '/query/step',
        message: `gives ${points} points; at most ${MAX_POINTS} (use a step of at least ${minimumStep(fromMs, toMs)})`,
      },
    ])
  }
  return { fromMs, toMs, stepMs, whole: fromMs <= span.startMs && toMs >= defaultTo, nowMs, openEnded: !query.to && span.endMs === null }
}

/**
 * Reads the buckets and puts the trace together, as of one instant (`summary.as_of`): the end of
 * a closed window, or for an open delivery the later of now and its newest reading (readings up to
 * 5 min ahead of the clock are accepted, so nothing they show lies past the chart's end).
 *
 * A tote silent longer than the profile's `max_gap_s` leaves its delivery's stored figures where
 * the last evaluated reading left them; the time since is unknown, and unknown time counts as out
 * of range (rules/README.md). The trace counts it up to as_of (`time_out_of_range_s`,
 * `unknown_s`) and lists it as an open `unknown` excursion, so a silent tote never reads "OK".
 * One silence is listed once: the "no signal" intervals are merged (mergeNoSignal).
 */
export async function readTrace(sink: ReadingSink, delivery: TracedDelivery, window: TraceWindow): Promise<TemperatureTrace> {
  const readToMs = window.openEnded ? Math.max(window.toMs, window.nowMs + FUTURE_TOLERANCE_MS) : window.toMs
  // The sink's ranges are half-open; the end of the window is included. A window starting before
  // the binding reads from the binding's start: no reading of the delivery is older (its dispatch
  // fixes it for good), and on QuestDB the range is what is scanned. Buckets stay epoch-aligned.
  const readFromMs = Math.max(window.fromMs, deliverySpan(delivery).startMs)
  const buckets = await sink.bucketed(delivery.id, readFromMs, readToMs + 1, window.stepMs)
  const points = buckets.map((b) => ({ t: iso(b.t), min: b.min, max: b.max, avg: roundCelsius(b.avg), n: b.n }))
  const lastReadingMs = await newestReading(sink, delivery.id, buckets.at(-1)?.t ?? null, window.stepMs, readToMs)
  const asOfMs = window.openEnded ? Math.max(window.toMs, lastReadingMs ?? -Infinity) : window.toMs
  const stored = delivery.cold_chain
  const silence = pendingSilence(delivery, lastReadingMs, asOfMs)
  const gaps =
    stored.required && stored.profile?.max_gap_s
      ? silencesBetweenPoints(
          buckets.map((b) => b.t),
          window.stepMs,
          stored.profile.max_gap_s * 1_000,
        )
      : []
  const excursions = mergeNoSignal([...stored.excursions, ...gaps, ...(silence ? [silence.excursion] : [])]).filter((e) =>
    overlaps(e, window.fromMs, asOfMs),
  )
  const useStored = window.whole && stored.required
  return {
    delivery_id: delivery.id,
    rx_id: delivery.rx_id,
    unit: 'Cel',
    profile: stored.profile,
    from: iso(window.fromMs),
    to: iso(asOfMs),
    step_s: window.stepMs / 1_000,
    points,
    excursions,
    summary: {
      min_c: useStored ? stored.min_c : extreme(points, 'min'),
      max_c: useStored ? stored.max_c : extreme(points, 'max'),
      mkt_c: stored.mkt_c,
      time_out_of_range_s: stored.time_out_of_range_s + (silence?.seconds ?? 0),
      unknown_s: (stored.unknown_s ?? 0) + (silence?.seconds ?? 0),
      as_of: iso(asOfMs),
      scope: useStored ? 'delivery' : 'window',
    },
  }
}

/** The newest reading's time, looked up in the last bucket only; null without readings. */
async function newestReading(
  sink: ReadingSink,
  deliveryId: string,
  lastBucketMs: number | null,
  stepMs: number,
  toMs: number,
): Promise<number | null> {
  if (lastBucketMs === null) return null
  const rows = await sink.readingsForDelivery(deliveryId, lastBucketMs, Math.min(lastBucketMs + stepMs, toMs + 1))
  return rows.length ? Math.max(...rows.map((r) => r.ts)) : lastBucketMs
}

/**
 * Sensor-gap time after the newest reading (or the binding's start) that the stored figures do
 * not hold yet: from newest + max_gap_s up to as of, or up to the delivery's end.
 */
function pendingSilence(
  delivery: TracedDelivery,
  lastReadingMs: number | null,
  asOfMs: number,
): { seconds: number; excursion: TraceExcursion } | null {
  const profile = delivery.cold_chain.profile
  if (!delivery.cold_chain.required || !profile || profile.max_gap_s === null) return null
  const span = deliverySpan(delivery)
  const unknownFrom = (lastReadingMs ?? span.startMs) + profile.max_gap_s * 1_000
  const until = Math.min(asOfMs, span.endMs ?? Infinity)
  if (!(until > unknownFrom)) return null
  const seconds = (until - unknownFrom) / 1_000
  return {
    seconds,
    excursion: {
      started_at: iso(unknownFrom),
      ended_at: span.endMs === null ? null : iso(until),
      duration_s: seconds,
      peak_c: null,
      kind: 'unknown',
    },
  }
}

function parseStep(text: string): number {
  let stepMs: number
  try {
    stepMs = parseDuration(text)
  } catch {
    throw validationFailed([{ pointer: '/query/step', message: 'must be a duration such as 30s, 5m or 1h' }])
  }
  if (stepMs < MIN_STEP_MS) throw validationFailed([{ pointer: '/query/step', message: 'must be at least 1s' }])
  return stepMs
}

/** Buckets are aligned to multiples of the step since the epoch (see TemperatureBucket). */
function bucketCount(fromMs: number, toMs: number, stepMs: number): number {
  return Math.floor(toMs / stepMs) - Math.floor(fromMs / stepMs) + 1
}

function minimumStep(fromMs: number, toMs: number): string {
  const seconds = Math.ceil((toMs - fromMs) / 1_000 / (MAX_POINTS - 1))
  return `${Math.max(seconds, 1)}s`
}

function overlaps(e: TraceExcursion, fromMs: number, toMs: number): boolean {
  const start = Date.parse(e.started_at)
  const end = e.ended_at === null ? Infinity : Date.parse(e.ended_at)
  return start <= toMs && end >= fromMs
}

function extreme(points: readonly TracePoint[], which: 'min' | 'max'): number | null {
  if (points.length === 0) return null
  return which === 'min' ? Math.min(...points.map((p) => p.min)) : Math.max(...points.map((p) => p.max))
}
