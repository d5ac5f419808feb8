import type { CustodyEvent } from '../domain/custody.js'
import type { DeliveryStatus } from '../domain/delivery-machine.js'
import { distanceMetres, isAfterHours, type LatLng } from '../domain/pricing.js'
import { fromJson, type Database, type Executor } from '../store/schema.js'
import type { ActionInput } from './delivery-shapes.js'

// The ends a fleet is paid for; a cancelled delivery was never carried (docs/fleet.md, Pricing).
const PRICED_ENDINGS: readonly DeliveryStatus[] = ['DELIVERED', 'FAILED', 'RETURNED']

/** Whether moving to `status` fixes the delivery's pricing facts: its first priced end. */
export const isFirstPricedEnd = (status: DeliveryStatus, delivery: Pick<Database['deliveries'], 'ended_at'>): boolean =>
  PRICED_ENDINGS.includes(status) && delivery.ended_at === null

/**
 * What pricing needs, fixed when a delivery first ends as DELIVERED, FAILED or RETURNED
 * (docs/fleet.md, Pricing): when the end was recorded (its reconciliation period), the
 * great-circle distance from the pickup (its custody location, else the pharmacy's) to where
 * it ended, whether it ended after hours in the pharmacy's time zone, and whether a delivery
 * reached the patient by its `eta`. A later RETURNED after FAILED keeps the first end's facts.
 */
export async function pricingAtEnd(
  db: Executor,
  delivery: Database['deliveries'],
  chain: CustodyEvent[],
  input: ActionInput,
  occurredAt: string,
  recordedAt: string,
): Promise<Partial<Database['deliveries']>> {
  const pharmacy = await db
    .selectFrom('pharmacies')
    .select(['timezone', 'location'])
    .where('id', '=', delivery.pharmacy_id)
    .executeTakeFirstOrThrow()
  const origin = chain.find((e) => e.type === 'picked_up')?.location ?? fromJson<LatLng | null>(pharmacy.location)
  const end = ('location' in input && input.location) || null
  return {
    ended_at: recordedAt,
    distance_m: origin && end ? distanceMetres(origin, end) : null,
    after_hours: isAfterHours(occurredAt, pharmacy.timezone) ? 1 : 0,
    on_time: input.action === 'deliver' ? (Date.parse(occurredAt) <= Date.parse(delivery.eta) ? 1 : 0) : null,
  }
}
