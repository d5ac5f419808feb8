import type { CustodyEvent } from './custody.js'

/**
 * Who may hand the goods to whom. Pure: the delivery, its custody chain and the action in; the
 * parties of the next custody event, or a refusal naming the offending member, out. What needs
 * the store (is this a driver of the fleet, is the tote free) is checked by the caller.
 */

/** What the custody rules read of an action; the request bodies carry more. */
export type CustodyAction =
  | { action: 'dispatch'; fleet_id: string; driver_id?: string | undefined }
  | { action: 'reattempt'; driver_id?: string | undefined }
  | { action: 'pickup' | 'handoff' | 'return'; from: string; to: string }
  | { action: 'deliver' | 'fail' | 'cancel' | 'disposition' }

export type Handover = {
  ok: true
  from: string | null
  to: string | null
  /** A party that must be a driver of the delivery's fleet, and the member that named it. */
  driver: { id: string; pointer: string } | null
}

/** A JSON pointer into the request body and why that member is refused. */
export type CustodyRefusal = { ok: false; pointer: string; message: string }

/** Custody events after which someone new physically holds the goods. */
const HANDING_OVER: ReadonlySet<CustodyEvent['type']> = new Set(['created', 'picked_up', 'handoff', 'returned', 'delivered'])

/** Who physically holds the goods: the receiving party of the last handing-over event. */
export function currentHolder(chain: readonly CustodyEvent[]): string | null {
  for (let i = chain.length - 1; i >= 0; i--) {
    const e = chain[i]!
    if (HANDING_OVER.has(e.type)) return e.to
  }
  return null
}

export function decideHandover(
  delivery: { pharmacy_id: string; fleet_id?: string | null; driver_id?: string | null },
  chain: readonly CustodyEvent[],
  input: CustodyAction,
): Handover | CustodyRefusal {
  const holder = currentHolder(chain)
  switch (input.action) {
    case 'dispatch':
      // The goods are with the fleet (its driver, if named) from here; the dispatch checks the driver against the fleet it names.
      return handover(delivery.pharmacy_id, input.driver_id ?? input.fleet_id)
    case 'reattempt':
      // The goods stay where the failed attempt left them; the (possibly new) driver sets out with them again.
      return handover(
        holder,
        input.driver_id ?? delivery.driver_id ?? delivery.fleet_id ?? null,
        input.driver_id ? '/driver_id' : undefined,
      )
    case 'pickup':
      // After a failed attempt the driver may still hold the goods: they sign the pickup of the reattempt themselves.
      if (!/^(us|ph)_/.test(input.from) && !(input.from === holder && holder.startsWith('dr_')))
        return refuse(
          '/from',
          'pickup is signed by pharmacy staff (us_…), the pharmacy (ph_…), or after a failed attempt the driver holding the goods',
        )
      if (input.from.startsWith('ph_') && input.from !== delivery.pharmacy_id) return refuse('/from', "is not this delivery's pharmacy")
      return handover(input.from, input.to, '/to')
    case 'handoff':
      if (input.from !== holder) return refuse('/from', `the goods are held by ${holder}`)
      if (input.to === input.from) return refuse('/to', 'must be another driver')
      return handover(input.from, input.to, '/to')
    case 'return':
      if (input.from !== holder) return refuse('/from', `the goods are held by ${holder}`)
      if (input.to !== delivery.pharmacy_id) return refuse('/to', `returns go back to the pharmacy ${delivery.pharmacy_id}`)
      return handover(input.from, input.to)
    case 'deliver':
      return handover(holder, 'patient')
    case 'fail':
    case 'cancel':
    case 'disposition':
      // Nothing changes hands.
      return handover(null, null)
  }
}

function handover(from: string | null, to: string | null, driverPointer?: string): Handover {
  return { ok: true, from, to, driver: driverPointer && to !== null ? { id: to, pointer: driverPointer } : null }
}

const refuse = (pointer: string, message: string): CustodyRefusal => ({ ok: false, pointer, message })
