// Hard limits judged on arrival (rules/README.md, Semantics: "Hard limits at once"). A reading beyond
// a hard limit breaks the cold chain whatever arrives after it, so its delivery need not wait for the
// reorder window: it is judged at once on the readings that have arrived. Only the break goes out
// early; the fold itself still waits for the window, so every other rule keeps its event-time
// determinism.
import { evaluate, type Reading } from './engine.js'
import { eventKey, type RuleEvent } from './events.js'
import type { TemperatureProfile } from './profile.js'
import type { ColdChainState } from './state.js'

/** Strictly beyond hard_min_c or hard_max_c (the rule `hard_limit` breaks on). */
export function beyondHardLimit(profile: TemperatureProfile, temp: number): boolean {
  return (profile.hard_min_c !== null && temp < profile.hard_min_c) || (profile.hard_max_c !== null && temp > profile.hard_max_c)
}

/**
 * `reading` (beyond a hard limit) has arrived and waits in the reorder window with `held` (the
 * delivery's held readings, ts order, `reading` among them). Judges at once what the window would
 * judge if nothing else arrived: the state's fold continued, on a copy, over the held readings up to
 * and including `reading`. The first break of that fold is emitted and recorded in `state.broken`:
 * the hard limit itself, or an earlier break those readings already show (so readings that arrive in
 * order break exactly as the window would have). That break is final: a reading arriving later is
 * evaluated as usual but breaks nothing again.
 *
 * MUTATES only `state.broken` (time accounting untouched, as checkSilence). Returns whether it broke.
 */
export function breakOnArrival(
  state: ColdChainState,
  profile: TemperatureProfile,
  reading: Reading,
  held: readonly Reading[],
  events: RuleEvent[] = [],
): boolean {
  if (state.broken !== null || !beyondHardLimit(profile, reading.temp_c)) return false
  let n = 0
  while (n < held.length && held[n]!.ts <= reading.ts) n++
  // The copy costs one clone per delivery at most: once broken, this returns at the first test.
  const projected = evaluate(structuredClone(state), profile, n === held.length ? held : held.slice(0, n))
  const brk = projected.events.find((e) => e.key === eventKey.break)
  if (brk === undefined) return false // `reading` was not among the held ones (released, late or skipped)
  state.broken = { ...projected.state.broken! }
  events.push(brk)
  return true
}
