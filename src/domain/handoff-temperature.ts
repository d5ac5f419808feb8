import type { ColdChainFigures } from './cold-chain.js'
import type { HandoffTemperature } from './custody-event.js'

/**
 * The `temperature` member of a cold-chain delivery's custody event (docs/api.md, Temperature at each handoff, Temperature
 * at each handoff). Pure: the newest reading of the delivery's binding at or before the event's
 * `occurred_at` (read by the caller, once per event), and the cold-chain figures the monitor has
 * stored, in; the member out.
 *
 * The state is the one judged for that moment, not the one stored now, so a backdated event
 * reads the same as one recorded on time: BROKEN from `broken_at` on, EXCURSION within an
 * announced excursion, else OK.
 */
export function handoffTemperature(
  figures: Pick<ColdChainFigures, 'broken_at' | 'excursions'>,
  reading: { temp_c: number; ts: number } | null,
  occurredAt: string,
): HandoffTemperature {
  const at = Date.parse(occurredAt)
  const within = (from: string, to: string | null) => Date.parse(from) <= at && (to === null || at < Date.parse(to))
  const state =
    figures.broken_at !== null && Date.parse(figures.broken_at) <= at
      ? 'BROKEN'
      : figures.excursions.some((e) => within(e.started_at, e.ended_at))
        ? 'EXCURSION'
        : 'OK'
  return {
    last_c: reading ? reading.temp_c : null,
    at: reading ? new Date(reading.ts).toISOString() : null,
    state,
  }
}

/** A new delivery's `created` event: no tote is bound yet, so no reading, and nothing judged yet. */
export const beforeAnyReading: HandoffTemperature = { last_c: null, at: null, state: 'OK' }
