import { validationFailed } from '../errors.js'
import type { Database, Executor } from '../store/schema.js'

/**
 * A `us_…` party in a hand-over names a person: an active (not disabled) user of the
 * delivery's pharmacy, or of its fleet (a driver or dispatcher). A chain of custody naming
 * someone who does not work there, or no longer may sign, is refused with 422.
 */
export async function checkUserParties(
  db: Executor,
  delivery: Pick<Database['deliveries'], 'pharmacy_id' | 'fleet_id'>,
  parties: { from: string; to: string },
): Promise<void> {
  for (const field of ['from', 'to'] as const) {
    const id = parties[field]
    if (!id.startsWith('us_')) continue
    const user = await db.selectFrom('users').select(['pharmacy_id', 'fleet_id', 'disabled']).where('id', '=', id).executeTakeFirst()
    const belongs =
      !!user &&
      ((user.pharmacy_id !== null && user.pharmacy_id === delivery.pharmacy_id) ||
        (user.fleet_id !== null && user.fleet_id === delivery.fleet_id))
    if (!user || user.disabled || !belongs) {
      throw validationFailed([{ pointer: `/${field}`, message: `${id} is not an active user of this delivery's pharmacy or fleet` }])
    }
  }
}
