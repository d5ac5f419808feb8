import { replay, type StabilityLedger, type StabilityPlan, type TemperatureProfile } from '../../rules/index.js'
import type { Database } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/sink.js'

// The end of a leg still open: the sink's ranges are half-open and need a number.
const OPEN_END = Number.MAX_SAFE_INTEGER

/**
 * A leg's stability ledger from its stored readings, judged as the cold-chain monitor judges them
 * (the same rules, profile, plan and binding time), so the answer is the one the delivery shows. Used
 * where the monitor's memory is not: a redelivery carries the ledger its returned leg ended with, and
 * an assessment recomputes a leg that has ended. Null for a delivery without a profile.
 */
export async function legLedger(
  sink: ReadingSink,
  delivery: Pick<Database['deliveries'], 'id' | 'profile' | 'bound_from' | 'bound_to'>,
  plan: StabilityPlan,
): Promise<StabilityLedger | null> {
  if (delivery.profile === null) return null
  const profile: TemperatureProfile = { ...(JSON.parse(delivery.profile) as TemperatureProfile), stability: plan }
  const boundAt = delivery.bound_from === null ? 0 : Date.parse(delivery.bound_from)
  // Only the leg's binding interval is read (a reading is the delivery's only inside it, and
  // bound_from never moves once dispatched; see cold-chain/sql-store.ts), never all time.
  const readings =
    delivery.bound_from === null
      ? []
      : await sink.readingsForDelivery(delivery.id, boundAt, delivery.bound_to === null ? OPEN_END : Date.parse(delivery.bound_to))
  return replay(profile, boundAt, readings).state.stability ?? null
}
