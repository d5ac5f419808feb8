import { iso } from '../clock.js'
import { AppError, validationFailed } from '../errors.js'
import { isUniqueViolation } from '../store/errors.js'

/**
 * Records kept as versions (a product's stability, a fleet's rate card): each PUT adds the next
 * version and none is ever edited, so what was judged or priced by one stays as it was.
 */

// Our clock and the caller's disagree a little; an effective_from this far back is still "now".
const CLOCK_SKEW_MS = 5_000
// Two PUTs racing for the next version number: the loser re-reads and takes the one after.
const MAX_ATTEMPTS = 5

/** When a new version takes effect: now, or the later time asked for; never in the past (422). */
export function effectiveFromOf(requested: string | undefined, now: number): string {
  const effectiveFrom = requested === undefined ? iso(now) : iso(Date.parse(requested))
  if (Date.parse(effectiveFrom) < now - CLOCK_SKEW_MS)
    throw validationFailed([{ pointer: '/effective_from', message: 'may not be in the past' }])
  return effectiveFrom
}

/**
 * Runs `add` (a transaction that reads the latest version and inserts the next) until no other
 * writer took that number first; 409 `conflict` after MAX_ATTEMPTS, naming `what` was added.
 */
export async function addNextVersion<T>(what: string, add: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await add()
    } catch (error) {
      if (!isUniqueViolation(error)) throw error
      if (attempt >= MAX_ATTEMPTS) throw new AppError('conflict', `Another ${what} was being added at the same time; retry.`)
    }
  }
}
