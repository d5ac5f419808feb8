import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { notFound, validationFailed } from '../errors.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { Database, Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { fleetMoneyVisibleTo, requireUnrestricted } from './fleet-money.js'
import { addNextVersion, effectiveFromOf } from './versions.js'

export type RateCard = {
  fleet_id: string
  version: number
  currency: string
  base_fee_cents: number
  per_km_cents: number
  cold_chain_surcharge_cents: number
  failed_attempt_fee_cents: number
  after_hours_multiplier: number
  commission_bps: number
  effective_from: string
  created_at: string
}

export type NewRateCard = Omit<RateCard, 'fleet_id' | 'version' | 'created_at' | 'effective_from'> & { effective_from?: string | undefined }

type Row = Database['rate_cards']

/** Versioned rate cards: each PUT adds a version, none is ever edited (docs/fleet.md, Rate cards). */
export class RateCardService {
  constructor(private readonly deps: ServiceDeps) {}

  /** The version in force now. */
  async current(principal: Principal, fleetId: string): Promise<RateCard> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
    const row = await rateCardInForce(this.deps.db, fleetId, iso(this.deps.clock.now()))
    if (!row) throw notFound('rate card in force')
    return toRateCard(row)
  }

  async versions(principal: Principal, fleetId: string, page: PageRequest): Promise<Page<RateCard>> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
    const result = await paginate(this.deps.db.selectFrom('rate_cards').selectAll().where('fleet_id', '=', fleetId), 'version', page)
    return { data: result.data.map(toRateCard), next_cursor: result.next_cursor }
  }

  /** A new version; effective now unless `effective_from` names a later time. */
  async put(principal: Principal, fleetId: string, input: NewRateCard, record?: RecordAnswer<RateCard>): Promise<RateCard> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
    requireUnrestricted(principal, "sets a fleet's rate card")
    const now = this.deps.clock.now()
    // Versions in force at past dispatches stay as they were: a new one starts now or later.
    const effectiveFrom = effectiveFromOf(input.effective_from, now)
    return addNextVersion('rate card version', () =>
      this.deps.db.transaction().execute(async (trx) => {
        const last = await trx
          .selectFrom('rate_cards')
          .select(['version', 'currency'])
          .where('fleet_id', '=', fleetId)
          .orderBy('version', 'desc')
          .limit(1)
          .executeTakeFirst()
        // One currency per fleet, so a period's totals add up in one unit.
        if (last && last.currency !== input.currency)
          throw validationFailed([{ pointer: '/currency', message: `must stay ${last.currency}, the currency of this fleet's rate cards` }])
        const row: Row = {
          fleet_id: fleetId,
          version: (last?.version ?? 0) + 1,
          currency: input.currency,
          base_fee_cents: input.base_fee_cents,
          per_km_cents: input.per_km_cents,
          cold_chain_surcharge_cents: input.cold_chain_surcharge_cents,
          failed_attempt_fee_cents: input.failed_attempt_fee_cents,
          after_hours_multiplier_e4: Math.round(input.after_hours_multiplier * 10_000),
          commission_bps: input.commission_bps,
          effective_from: effectiveFrom,
          created_at: iso(now),
          created_by: principal.clientId,
        }
        await trx.insertInto('rate_cards').values(row).execute()
        const card = toRateCard(row)
        await record?.(trx, card)
        return card
      }),
    )
  }
}

/** The version in force at `at`: the latest `effective_from` not after it (the higher version on a tie). */
export function rateCardInForce(db: Executor, fleetId: string, at: string): Promise<Row | undefined> {
  return db
    .selectFrom('rate_cards')
    .selectAll()
    .where('fleet_id', '=', fleetId)
    .where('effective_from', '<=', at)
    .orderBy('effective_from', 'desc')
    .orderBy('version', 'desc')
    .limit(1)
    .executeTakeFirst()
}

function toRateCard(row: Row): RateCard {
  return {
    fleet_id: row.fleet_id,
    version: row.version,
    currency: row.currency,
    base_fee_cents: row.base_fee_cents,
    per_km_cents: row.per_km_cents,
    cold_chain_surcharge_cents: row.cold_chain_surcharge_cents,
    failed_attempt_fee_cents: row.failed_attempt_fee_cents,
    after_hours_multiplier: row.after_hours_multiplier_e4 / 10_000,
    commission_bps: row.commission_bps,
    effective_from: row.effective_from,
    created_at: row.created_at,
  }
}
