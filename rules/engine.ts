// The cold-chain rule engine (rules/README.md): a fold over readings in event-time order. Pure: no clock,
// no I/O; the same readings always give the same state and events, however they are batched.
//
// Time model. Each reading's value holds until the next reading (a step function), but for at
// most max_gap_s; past that the temperature is unknown, and unknown time counts as out of range.
// Time before the first reading is unknown too once it exceeds max_gap_s after binding.
//
// Hot path: per reading O(1) arithmetic on the state object the caller owns; no allocation
// except for the events emitted and the (rare) start of an out-of-range interval.
import { breakColdChain, breakCrossing, mktExceeded } from './breaks.js'
import { eventKey, rfc3339, type BreakReason, type BreakThreshold, type RuleEvent } from './events.js'
import { addToMkt } from './mkt.js'
import type { TemperatureProfile } from './profile.js'
import { chargeReading, type StabilityEvent, type StabilityLedger } from './stability-ledger.js'
import { initialColdChain, type ColdChainState, type OpenInterval } from './state.js'

export type Reading = { ts: number; temp_c: number }

const NO_LIMIT = Number.POSITIVE_INFINITY

export function gapMs(profile: TemperatureProfile): number {
  return profile.max_gap_s === null ? NO_LIMIT : profile.max_gap_s * 1000
}

/**
 * Evaluates readings in ts order. MUTATES `state` (and returns it) and appends to `events`.
 * Readings at or before state.lastTs, or with a non-finite ts/temp_c, are skipped: late readings
 * go through recompute() instead.
 */
export function evaluate(
  state: ColdChainState,
  profile: TemperatureProfile,
  readings: readonly Reading[],
  events: RuleEvent[] = [],
): { state: ColdChainState; events: RuleEvent[] } {
  for (let i = 0; i < readings.length; i++) {
    const r = readings[i]!
    const ts = r.ts
    const temp = r.temp_c
    if (!Number.isFinite(ts) || !Number.isFinite(temp)) continue
    if (state.lastTs !== null && ts <= state.lastTs) continue
    advanceTo(state, profile, ts, events)
    takeReading(state, profile, ts, temp, events)
    if (state.stability !== undefined) chargeStability(state, state.stability, profile, ts, temp, events)
  }
  return { state, events }
}

/** Reused for every reading: the ledger's events are turned into rule events at once. */
const stabilityScratch: StabilityEvent[] = []

/**
 * The same reading charged to the items' stability ledger, in the same fold: budget-low goes out as it
 * is; an exhausted item is the delivery's break (reason stability_exhausted) unless it already broke.
 */
function chargeStability(
  state: ColdChainState,
  ledger: StabilityLedger,
  profile: TemperatureProfile,
  ts: number,
  temp: number,
  events: RuleEvent[],
): void {
  const scratch = stabilityScratch
  chargeReading(ledger, ts, temp, scratch)
  for (let i = 0; i < scratch.length; i++) {
    const event = scratch[i]!
    if (event.type === 'stability.budget-low') events.push(event)
    else if (state.broken === null)
      breakColdChain(state, profile, events, 'stability_exhausted', 'stability', event.at, {
        temp_c: event.data.temp_c,
        outMs: state.outMs,
        unknownMs: state.unknownMs,
        intervalStart: state.open?.start ?? null,
        mkt: state.mkt,
        item: event.data,
      })
  }
  scratch.length = 0
}

/** Rebuilds the state from every reading of a delivery (sorted by ts; duplicates are skipped). */
export function replay(
  profile: TemperatureProfile,
  boundAtMs: number,
  readingsSorted: readonly Reading[],
): { state: ColdChainState; events: RuleEvent[] } {
  return evaluate(initialColdChain(profile, boundAtMs), profile, readingsSorted)
}

/** Accounts for the time between the last reading (or binding) and `to`. */
function advanceTo(state: ColdChainState, profile: TemperatureProfile, to: number, events: RuleEvent[]): void {
  const gap = gapMs(profile)
  const last = state.lastTs
  if (last === null) {
    const since = state.boundAt + gap
    if (to > since) sensorGap(state, profile, since, to, events)
    return
  }
  const knownEnd = to < last + gap ? to : last + gap
  if (state.open !== null) spendOutOfRange(state, profile, last, knownEnd, false, events)
  addToMkt(state.mkt, state.lastTemp!, (knownEnd - last) / 1000)
  judgeMkt(state, profile, knownEnd, events)
  if (to > knownEnd) sensorGap(state, profile, knownEnd, to, events)
}

function sensorGap(state: ColdChainState, profile: TemperatureProfile, since: number, to: number, events: RuleEvent[]): void {
  if (state.offlineAnnouncedSince !== since) {
    state.offlineAnnouncedSince = since
    events.push({
      type: 'sensor.offline',
      key: eventKey.offline(since),
      at: since,
      data: {
        last_reading_at: state.lastTs === null ? null : rfc3339(state.lastTs),
        offline_since: rfc3339(since),
        back_online_at: rfc3339(to),
        max_gap_s: profile.max_gap_s!,
      },
    })
  }
  spendOutOfRange(state, profile, since, to, true, events)
}

/** [from, to) is out of range (known value of state.lastTemp, or unknown): account and judge it. */
function spendOutOfRange(
  state: ColdChainState,
  profile: TemperatureProfile,
  from: number,
  to: number,
  unknown: boolean,
  events: RuleEvent[],
): void {
  if (!(to > from)) return
  let open = state.open
  if (open === null) open = state.open = { start: from, kind: 'unknown', peak_c: null, unknown_ms: 0, announced: false }
  const outBefore = state.outMs
  const unknownBefore = state.unknownMs
  const span = to - from
  state.outMs += span
  if (unknown) {
    state.unknownMs += span
    open.unknown_ms += span
  }

  const excursionAt = open.start + profile.grace_s * 1000
  const announce = !open.announced && to > excursionAt
  const crossing = state.broken === null ? breakCrossing(profile, open.start, outBefore, from, to) : null
  // Events leave in event-time order; an excursion announced at the same instant goes first.
  if (announce && (crossing === null || excursionAt <= crossing.at)) announceExcursion(profile, open, excursionAt, events)
  if (crossing !== null) {
    const reason: BreakReason = unknown
      ? 'sensor_gap'
      : crossing.threshold === 'max_excursion_s'
        ? 'excursion_too_long'
        : 'cumulative_budget'
    breakColdChain(state, profile, events, reason, crossing.threshold, crossing.at, {
      temp_c: unknown ? null : state.lastTemp,
      outMs: outBefore + (crossing.at - from),
      unknownMs: unknownBefore + (unknown ? crossing.at - from : 0),
      intervalStart: open.start,
      mkt: state.mkt,
    })
  }
  if (announce && !open.announced) announceExcursion(profile, open, excursionAt, events)
}

function announceExcursion(profile: TemperatureProfile, open: OpenInterval, at: number, events: RuleEvent[]): void {
  open.announced = true
  events.push({
    type: 'temperature.excursion',
    key: eventKey.excursion(open.start),
    at,
    data: {
      excursion_started_at: rfc3339(open.start),
      kind: open.kind,
      peak_c: open.peak_c,
      min_c: profile.min_c,
      max_c: profile.max_c,
      grace_s: profile.grace_s,
    },
  })
}

/** How far a temperature is outside [min_c, max_c] (≤ 0 inside). */
function beyondRange(profile: TemperatureProfile, temp: number): number {
  return temp > profile.max_c ? temp - profile.max_c : profile.min_c - temp
}

/** The reading at `ts` itself: extremes, hard limits, start or end of an out-of-range interval. */
function takeReading(state: ColdChainState, profile: TemperatureProfile, ts: number, temp: number, events: RuleEvent[]): void {
  state.readings++
  if (state.min_c === null || temp < state.min_c) state.min_c = temp
  if (state.max_c === null || temp > state.max_c) state.max_c = temp

  if (temp < profile.min_c || temp > profile.max_c) {
    const kind = temp > profile.max_c ? 'high' : 'low'
    const open = state.open
    if (open === null) {
      state.open = { start: ts, kind, peak_c: temp, unknown_ms: 0, announced: false }
    } else if (open.peak_c === null || beyondRange(profile, temp) > beyondRange(profile, open.peak_c)) {
      open.peak_c = temp
      open.kind = kind
    }
    if (state.broken === null) judgeHardLimits(state, profile, ts, temp, events)
  } else if (state.open !== null) {
    endInterval(state, ts, temp, events)
  }
  state.lastTs = ts
  state.lastTemp = temp
}

function judgeHardLimits(state: ColdChainState, profile: TemperatureProfile, ts: number, temp: number, events: RuleEvent[]): void {
  const threshold: BreakThreshold | null =
    profile.hard_min_c !== null && temp < profile.hard_min_c
      ? 'hard_min_c'
      : profile.hard_max_c !== null && temp > profile.hard_max_c
        ? 'hard_max_c'
        : null
  if (threshold === null) return
  breakColdChain(state, profile, events, 'hard_limit', threshold, ts, {
    temp_c: temp,
    outMs: state.outMs,
    unknownMs: state.unknownMs,
    intervalStart: state.open?.start ?? null,
    mkt: state.mkt,
  })
}

function endInterval(state: ColdChainState, ts: number, temp: number, events: RuleEvent[]): void {
  const open = state.open!
  state.open = null
  if (!open.announced) return // a blip within grace: counted in outMs, not an excursion
  state.excursions.push({ start: open.start, end: ts, kind: open.kind, peak_c: open.peak_c, unknown_ms: open.unknown_ms })
  events.push({
    type: 'temperature.recovered',
    key: eventKey.recovered(open.start),
    at: ts,
    data: {
      excursion_started_at: rfc3339(open.start),
      recovered_at: rfc3339(ts),
      duration_s: (ts - open.start) / 1000,
      kind: open.kind,
      peak_c: open.peak_c,
      temp_c: temp,
      unknown_s: open.unknown_ms / 1000,
    },
  })
}

/** USP <1079.2> MKT over the whole delivery so far, judged once MKT_MIN_COVERAGE_S is covered. */
function judgeMkt(state: ColdChainState, profile: TemperatureProfile, at: number, events: RuleEvent[]): void {
  if (state.broken !== null || !mktExceeded(profile, state.mkt)) return
  breakColdChain(state, profile, events, 'mkt_exceeded', 'mkt_max_c', at, {
    temp_c: state.lastTemp,
    outMs: state.outMs,
    unknownMs: state.unknownMs,
    intervalStart: state.open?.start ?? null,
    mkt: state.mkt,
  })
}
