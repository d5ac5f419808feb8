// Late readings (rules/README.md, Semantics): a reading older than what was already evaluated is
// stored and included in the recomputed summary, and may add a break, but events already sent
// are never retracted.
import { replay, type Reading } from './engine.js'
import { eventKey, type RuleEvent } from './events.js'
import type { TemperatureProfile } from './profile.js'
import type { ColdChainState } from './state.js'

/**
 * Rebuilds a delivery's state from all its stored readings (sorted by ts, late ones included)
 * and reconciles it with the live state:
 * - only readings up to `upTo` (default live.lastTs) are replayed (newer ones are still in the
 *   reorder window and will reach evaluate() normally; readings attributed to the delivery after
 *   the fact pass Infinity: those at or before the new lastTs are then skipped when released);
 * - a break the live state already announced stays, with its reason and time; otherwise a
 *   break found by the replay is returned as a new event;
 * - an excursion that is open in the replay but was not announced live is returned too, so a
 *   later temperature.recovered never refers to an unannounced excursion;
 * - nothing else is re-emitted.
 * Returns a new state to continue evaluating with; `live` is not modified.
 */
export function recompute(
  live: ColdChainState,
  profile: TemperatureProfile,
  allReadingsSorted: readonly Reading[],
  events: RuleEvent[] = [],
  upTo: number | null = live.lastTs,
): { state: ColdChainState; events: RuleEvent[] } {
  const readings = upTo === null ? [] : allReadingsSorted.filter((r) => r.ts <= upTo)
  const replayed = replay(profile, live.boundAt, readings)
  return reconcile(live, replayed.state, replayed.events, events)
}

/**
 * The reconciliation of recompute(), for a replay made elsewhere: `replayedState` is the state
 * of a replay of every reading (it is modified and returned), `replayedEvents` what that replay
 * emitted, at least since a state the live evaluation also went through; what is new goes to `events`.
 */
export function reconcile(
  live: ColdChainState,
  replayedState: ColdChainState,
  replayedEvents: readonly RuleEvent[],
  events: RuleEvent[] = [],
): { state: ColdChainState; events: RuleEvent[] } {
  const state = replayedState
  const added: RuleEvent[] = []
  const open = state.open
  if (open !== null && open.announced && !(live.open?.announced && live.open.start === open.start)) {
    const key = eventKey.excursion(open.start)
    const announced = replayedEvents.find((e) => e.key === key)
    if (announced) added.push(announced)
  }
  if (live.broken !== null) {
    state.broken = { ...live.broken }
  } else if (state.broken !== null) {
    const brk = replayedEvents.find((e) => e.key === eventKey.break)
    if (brk) added.push(brk)
  }
  state.offlineAnnouncedSince = live.offlineAnnouncedSince
  added.sort((a, b) => a.at - b.at)
  events.push(...added)
  return { state, events }
}
