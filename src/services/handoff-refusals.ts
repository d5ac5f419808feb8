import type { Principal } from '../auth/scopes.js'
import { canSee } from '../auth/tenancy.js'
import { iso } from '../clock.js'
import { AppError, type FieldError } from '../errors.js'
import type { ServiceDeps } from './context.js'
import type { ActionInput } from './delivery-shapes.js'

export type HandoffInput = Extract<ActionInput, { action: 'pickup' | 'handoff' | 'deliver' }>

/**
 * A handoff the rules refused: a pickup, handoff or deliver answered 409 (wrong state, a cold
 * chain hold) or 422 by the service's own checks (who holds the goods, who may sign, when).
 * Not a 404 (the caller may not see the delivery) nor a lost race (`conflict`).
 */
export function isRefusedHandoff(input: ActionInput, error: unknown): error is AppError {
  if (input.action !== 'pickup' && input.action !== 'handoff' && input.action !== 'deliver') return false
  return (
    error instanceof AppError &&
    (error.code === 'invalid_transition' || error.code === 'cold_chain_hold' || error.code === 'validation_failed')
  )
}

/**
 * A refused pickup, handoff or deliver leaves a `handoff.refused` event (docs/api.md, Refused
 * handoffs), committed on its own after the refusal: the action changed nothing, so the custody
 * chain gets no link (it records who held the goods, and nobody new did); the event takes the
 * delivery's next event `seq`, so a consumer still sees every event of the delivery numbered
 * without a gap. A failure to record it is logged; the caller still gets the refusal.
 */
export async function recordRefusal(
  deps: ServiceDeps,
  principal: Principal,
  id: string,
  input: HandoffInput,
  error: AppError,
): Promise<void> {
  try {
    const now = iso(deps.clock.now())
    const messages = await deps.db.transaction().execute(async (trx) => {
      const row = await trx
        .selectFrom('deliveries')
        .select(['pharmacy_id', 'fleet_id', 'driver_id', 'rx_id', 'status'])
        .where('id', '=', id)
        .executeTakeFirst()
      if (!row || !canSee(principal, row) || (principal.driverId && row.driver_id !== principal.driverId)) return 0
      const errors = Array.isArray(error.extra.errors) ? (error.extra.errors as FieldError[]) : []
      // A 422's detail is generic; its reason is what each refused member says.
      const reason = errors.length ? errors.map((e) => e.message).join('; ') : error.message
      const { messages } = await deps.outbox.append(trx, [
        {
          type: 'handoff.refused',
          pharmacy_id: row.pharmacy_id,
          fleet_id: row.fleet_id,
          delivery_id: id,
          rx_id: row.rx_id,
          data: {
            action: input.action,
            code: error.code,
            reason,
            errors,
            status: row.status,
            from: 'from' in input ? input.from : null,
            to: 'to' in input ? input.to : null,
            occurred_at: input.occurred_at ?? null,
            refused_at: now,
          },
        },
      ])
      return messages
    })
    deps.outbox.committed(messages)
  } catch (err) {
    deps.logger.warn({ err, deliveryId: id, action: input.action }, 'recording a refused handoff failed')
  }
}
