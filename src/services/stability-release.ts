import type { StabilityPlan } from '../../rules/index.js'
import type { StoredColdChain } from '../domain/cold-chain.js'
import type { Executor } from '../store/schema.js'

/** What a delivery released by its products' stability budgets records (docs/stability.md, Release). */
export type AutomaticRelease = {
  by: 'system'
  rule: 'stability_budget'
  versions: { ndc: string; product_id: string; version: number }[]
  remaining_fraction: number
  at: string
}

/**
 * The release a delivery earns as it is delivered: its pharmacy releases by budget and every item had a
 * product when the prescription was created (the plan's `auto`), nothing broke, and every item is within
 * its budget by the ledger as last saved. Null otherwise: the delivery is delivered as today.
 */
export async function automaticRelease(
  db: Executor,
  deliveryId: string,
  stored: StoredColdChain,
  at: string,
): Promise<AutomaticRelease | null> {
  const row = await db.selectFrom('delivery_stability').select('plan').where('delivery_id', '=', deliveryId).executeTakeFirst()
  if (!row) return null
  const plan = JSON.parse(row.plan) as StabilityPlan
  const ledger = stored.stability
  if (!plan.auto || !ledger || stored.state === 'BROKEN' || ledger.items.some((item) => item.verdict !== 'within')) return null
  return {
    by: 'system',
    rule: 'stability_budget',
    versions: plan.items.map(({ ndc, product_id, version }) => ({ ndc, product_id, version })),
    remaining_fraction: ledger.remaining_fraction,
    at,
  }
}
