import { checkSilence, type RuleEvent } from '../../../rules/index.js'
import type { Track } from './delivery-states.js'

/**
 * Sensor gaps by the wall clock (rules/silence.ts): open deliveries whose tote has gone quiet.
 * A tote with readings still in its reorder window, held for a reattribution, or received and
 * still being stored (`busy`, ColdChainMonitor) is not quiet: its readings are on their way.
 */
export function watchSilence(
  tracks: Iterable<Track>,
  now: number,
  busy: (toteId: string) => boolean,
  raise: (track: Track, events: readonly RuleEvent[]) => void,
): void {
  for (const track of tracks) {
    if (track.binding.toMs !== null || busy(track.toteId)) continue
    const before = track.state.offlineAnnouncedSince
    const events: RuleEvent[] = []
    checkSilence(track.state, track.binding.profile, now, events)
    if (events.length || before !== track.state.offlineAnnouncedSince) raise(track, events)
  }
}
