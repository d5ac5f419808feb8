// Wall-clock sensor-gap detection (profile max_gap_s): a bound tote that stops sending must not
// leave its delivery looking fine forever. Readings only advance event time; this check looks at
// the silence as of `nowMs` without advancing it, so readings that arrive later (a gateway that
// buffered them) are still evaluated normally.
import { breakColdChain, breakCrossing, mktExceeded } from './breaks.js'
import { gapMs } from './engine.js'
import { eventKey, rfc3339, type RuleEvent } from './events.js'
import { addToMkt } from './mkt.js'
import type { TemperatureProfile } from './profile.js'
import type { ColdChainState } from './state.js'

/**
 * Emits sensor.offline once the tote has been silent longer than max_gap_s since its last
 * evaluated reading (or since binding), and cold-chain.break if the silence so far already
 * implies one: the last value held until max_gap_s (its excursion limits, then MKT), then
 * unknown time counted as out of range. The break is the one evaluate() would emit if the next
 * reading came now (same `at`, reason and data); its reason is `sensor_gap` when the limit was
 * crossed in unknown time. Excursion events are left to evaluate().
 *
 * MUTATES `state` (only `offlineAnnouncedSince` and `broken`; time accounting is untouched, so
 * buffered readings that arrive later are evaluated normally and repeat nothing already sent).
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

  // Project what the next reading would reveal, in the order evaluate() judges it: the last
  // value held until `since` (excursion limits, then MKT at `since`) …
  let intervalStart = state.open?.start ?? null
  let outMs = state.outMs
  let mkt = state.mkt
  if (last !== null) {
    if (intervalStart !== null) {
      const crossing = breakCrossing(profile, intervalStart, outMs, last, since)
      if (crossing !== null) {
        const reason = crossing.threshold === 'max_excursion_s' ? 'excursion_too_long' : 'cumulative_budget'
        breakColdChain(state, profile, events, reason, crossing.threshold, crossing.at, {
          temp_c: state.lastTemp,
          outMs: outMs + (crossing.at - last),
          unknownMs: state.unknownMs,
          intervalStart,
          mkt,
        })
        return { state, events }
      }
      outMs += since - last
    }
    mkt = { ...state.mkt }
    addToMkt(mkt, state.lastTemp!, (since - last) / 1000)
    if (mktExceeded(profile, mkt)) {
      breakColdChain(state, profile, events, 'mkt_exceeded', 'mkt_max_c', since, {
        temp_c: state.lastTemp,
        outMs,
        unknownMs: state.unknownMs,
        intervalStart,
        mkt,
      })
      return { state, events }
    }
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
      mkt,
    })
  }
  return { state, events }
}
