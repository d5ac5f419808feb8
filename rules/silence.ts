// Wall-clock sensor-gap detection (SPEC §5 max_gap_s): a bound tote that stops sending must not
// leave its delivery looking fine forever. Readings only advance event time; this check looks at
// the silence as of `nowMs` without advancing it, so readings that arrive later (a gateway that
// buffered them) are still evaluated normally.
import { breakColdChain, breakCrossing, gapMs } from './engine.js'
import { eventKey, rfc3339, type RuleEvent } from './events.js'
import type { TemperatureProfile } from './profile.js'
import type { ColdChainState } from './state.js'

/**
 * Emits sensor.offline once the tote has been silent longer than max_gap_s since its last
 * evaluated reading (or since binding), and cold-chain.break if the silence so far, counted as
 * out of range, already outlasts max_excursion_s or the cumulative budget. The break's `at` is
 * the instant the limit was crossed, the same instant evaluate() would compute if the next
 * reading came after it; its reason is `sensor_gap` when that instant falls in unknown time.
 *
 * MUTATES `state` (only `offlineAnnouncedSince` and `broken`; time accounting is untouched).
 * Call it after the tote's reorder buffer has been flushed, with a wall clock that is
 * comparable to the readings' event time.
 */
export function checkSilence(
  state: ColdChainState,
  profile: TemperatureProfile,
  nowMs: number,
  events: RuleEvent[] = [],
): { state: ColdChainState; events: RuleEvent[] } {
  const gap = gapMs(profile)
  const last = state.lastTs
  const since = (last ?? state.boundAt) + gap
  if (!(nowMs > since)) return { state, events }

  if (state.offlineAnnouncedSince !== since) {
    state.offlineAnnouncedSince = since
    events.push({
      type: 'sensor.offline',
      key: eventKey.offline(since),
      at: since,
      data: {
        last_reading_at: last === null ? null : rfc3339(last),
        offline_since: rfc3339(since),
        back_online_at: null,
        max_gap_s: profile.max_gap_s!,
      },
    })
  }
  if (state.broken !== null) return { state, events }

  // Project what the next reading would reveal: the last value held until `since` …
  let intervalStart = state.open?.start ?? null
  let outMs = state.outMs
  if (last !== null && intervalStart !== null) {
    const crossing = breakCrossing(profile, intervalStart, outMs, last, since)
    if (crossing !== null) {
      const reason = crossing.threshold === 'max_excursion_s' ? 'excursion_too_long' : 'cumulative_budget'
      breakColdChain(state, profile, events, reason, crossing.threshold, crossing.at, {
        temp_c: state.lastTemp,
        outMs: outMs + (crossing.at - last),
        unknownMs: state.unknownMs,
        intervalStart,
      })
      return { state, events }
    }
    outMs += since - last
  }
  // … then unknown time until now.
  intervalStart ??= since
  const crossing = breakCrossing(profile, intervalStart, outMs, since, nowMs)
  if (crossing !== null) {
    breakColdChain(state, profile, events, 'sensor_gap', crossing.threshold, crossing.at, {
      temp_c: null,
      outMs: outMs + (crossing.at - since),
      unknownMs: state.unknownMs + (crossing.at - since),
      intervalStart,
    })
  }
  return { state, events }
}
