import { AppError } from '../errors.js'
import type { ColdChainStatus } from './cold-chain.js'
import type { CustodyType } from './custody.js'

/** Delivery states (docs/api.md, Deliveries and the chain of custody). */
export const deliveryStatuses = ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'DELIVERED', 'FAILED', 'RETURNED', 'CANCELLED'] as const
export type DeliveryStatus = (typeof deliveryStatuses)[number]

export const deliveryActions = ['dispatch', 'pickup', 'handoff', 'deliver', 'fail', 'reattempt', 'return', 'cancel', 'disposition'] as const
export type DeliveryAction = (typeof deliveryActions)[number]

type Move = { from: readonly DeliveryStatus[]; to: DeliveryStatus | 'unchanged'; custody: CustodyType; events: readonly string[] }

/** The transition table (written out in docs/api.md); the only place that knows which move is legal. */
const moves: Record<DeliveryAction, Move> = {
  dispatch: { from: ['QUEUED'], to: 'DISPATCHED', custody: 'dispatched', events: ['delivery.dispatched'] },
  pickup: { from: ['DISPATCHED'], to: 'PICKED_UP', custody: 'picked_up', events: ['custody.handoff-signed', 'delivery.picked-up'] },
  handoff: { from: ['PICKED_UP'], to: 'PICKED_UP', custody: 'handoff', events: ['custody.handoff-signed'] },
  deliver: { from: ['PICKED_UP'], to: 'DELIVERED', custody: 'delivered', events: ['custody.patient-verified', 'delivery.delivered'] },
  fail: { from: ['PICKED_UP'], to: 'FAILED', custody: 'failed', events: ['delivery.failed'] },
  // The same tote goes out again: FAILED does not end the binding (endingStatuses), so it holds.
  reattempt: { from: ['FAILED'], to: 'DISPATCHED', custody: 'reattempted', events: ['delivery.reattempted'] },
  return: { from: ['PICKED_UP', 'FAILED'], to: 'RETURNED', custody: 'returned', events: ['custody.handoff-signed', 'delivery.returned'] },
  cancel: { from: ['QUEUED', 'DISPATCHED'], to: 'CANCELLED', custody: 'cancelled', events: ['delivery.cancelled'] },
  disposition: {
    from: ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'FAILED', 'RETURNED'],
    to: 'unchanged',
    custody: 'disposition',
    events: ['cold-chain.disposition'],
  },
}

/** States after which the tote is released and the delivery is over. */
const endingStatuses: readonly DeliveryStatus[] = ['DELIVERED', 'RETURNED', 'CANCELLED']

export type DeliveryFacts = {
  status: DeliveryStatus
  coldChainState: ColdChainStatus
  released: boolean
  /** A pharmacist has already decided on the broken cold chain: that decision stands, a second is refused. */
  decided?: boolean | undefined
  /** The attempt under way or last made, 1 for the first (docs/api.md, Attempts). */
  attempt?: number | undefined
  /** The pharmacy's `max_attempts`, the first included; 3 when not told. */
  maxAttempts?: number | undefined
}

/** A pharmacy's attempts unless it sets `max_attempts`: the first and two more. */
export const DEFAULT_MAX_ATTEMPTS = 3

function allowedActions(delivery: DeliveryFacts): DeliveryAction[] {
  return deliveryActions.filter((action) => {
    if (!moves[action].from.includes(delivery.status)) return false
    if (action === 'reattempt') return (delivery.attempt ?? 1) < (delivery.maxAttempts ?? DEFAULT_MAX_ATTEMPTS)
    // Returned goods get a person's decision whatever their cold chain: released, they may go out
    // again as the prescription's next leg (docs/stability.md, Redelivery).
    return action !== 'disposition' || ((delivery.coldChainState === 'BROKEN' || delivery.status === 'RETURNED') && !delivery.decided)
  })
}

export type PlannedMove = { status: DeliveryStatus; custody: CustodyType; events: readonly string[]; ends: boolean }

/** Decides a move or refuses it with the actions that are allowed instead. */
export function planMove(delivery: DeliveryFacts, action: DeliveryAction): PlannedMove {
  // A broken cold chain holds the delivery before anything else is checked.
  if (action === 'deliver' && delivery.coldChainState === 'BROKEN' && !delivery.released) {
    throw new AppError('cold_chain_hold', 'The cold chain is broken: a pharmacist must release the delivery before it can be delivered.')
  }
  const allowed = allowedActions(delivery)
  if (!allowed.includes(action)) {
    const detail =
      action === 'disposition' && moves.disposition.from.includes(delivery.status)
        ? delivery.decided
          ? 'A disposition was already recorded for this delivery; a second decision is refused.'
          : 'A disposition is only recorded for a delivery whose cold chain is BROKEN, or one that was returned.'
        : action === 'reattempt' && moves.reattempt.from.includes(delivery.status)
          ? `Attempt ${delivery.attempt ?? 1} of ${delivery.maxAttempts ?? DEFAULT_MAX_ATTEMPTS} has failed: the pharmacy allows no more; return the goods to the pharmacy.`
          : `Cannot ${action} a delivery that is ${delivery.status}.`
    throw new AppError('invalid_transition', detail, { status_now: delivery.status, allowed_actions: allowed })
  }
  const move = moves[action]
  const status = move.to === 'unchanged' ? delivery.status : move.to
  return {
    status,
    custody: move.custody,
    events: move.events,
    ends: endingStatuses.includes(status) && !endingStatuses.includes(delivery.status),
  }
}
