import { replay, type StabilityLedger, type StabilityPlan, type TemperatureProfile } from '../../rules/index.js'
import type { Database } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/sink.js'

// Every reading of a delivery, whenever it was taken (the sink's ranges are half-open).
const ALL_TIME = Number.MAX_SAFE_INTEGER

/**
 * A leg's stability ledger from its stored readings, judged as the cold-chain monitor judges them
 * (the same rules, profile, plan and binding time), so the answer is the one the delivery shows. Used
 * where the monitor's memory is not: a redelivery carries the ledger its returned leg ended with, and
 * an assessment recomputes a leg that has ended. Null for a delivery without a profile.
 */
export async function legLedger(
  sink: ReadingSink,
  delivery: Pick<Database['deliveries'], 'id' | 'profile' | 'bound_from'>,
  plan: StabilityPlan,
): Promise<StabilityLedger | null> {
  if (delivery.profile === null) return null
  const profile: TemperatureProfile = { ...(JSON.parse(delivery.profile) as TemperatureProfile), stability: plan }
  const boundAt = delivery.bound_from === null ? 0 : Date.parse(delivery.bound_from)
  const readings = delivery.bound_from === null ? [] : await sink.readingsForDelivery(delivery.id, 0, ALL_TIME)
  return replay(profile, boundAt, readings).state.stability ?? null
}
