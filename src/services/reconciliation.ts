import type { Principal } from '../auth/scopes.js'
import { priceLine, ZERO_LINE, type Outcome, type PriceLine, type RateCardTerms } from '../domain/pricing.js'
import type { Db } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { fleetMoneyVisibleTo } from './fleet-money.js'

export type ReconciliationLine = {
  delivery_id: string
  pharmacy_id: string
  outcome: Outcome
  ended_at: string
  /** Null: dispatched while the fleet had no rate card in force, so every amount is 0. */
  rate_card_version: number | null
  distance_km: number | null
  after_hours: boolean
  cold_chain: boolean
} & PriceLine

export type Totals = { lines: number } & PriceLine

export type Period = { from: string; to: string }

export type StatementComparison = {
  from: string
  to: string
  matched: number
  mismatched: { delivery_id: string; ours: number; theirs: number; difference: number }[]
  missing_from_statement: { delivery_id: string; ours: number }[]
  unknown_in_statement: { delivery_id: string; theirs: number }[]
  totals: { ours: number; theirs: number; difference: number }
}

// Rows read per query: memory stays at one chunk whatever the period's length.
const CHUNK_ROWS = 2_000

const AMOUNTS = [
  'base_cents',
  'distance_cents',
  'cold_chain_cents',
  'failed_attempt_cents',
  'after_hours_cents',
  'gross_cents',
  'commission_cents',
  'payout_cents',
] as const

/**
 * Commission reconciliation (docs/fleet.md, Reconciliation): one line per delivery whose end
 * was recorded in [from, to), priced by the rate card version recorded at its dispatch.
 */
export class ReconciliationService {
  constructor(private readonly deps: ServiceDeps) {}

  /** Checks the caller may see the fleet's payouts, then gives the period's reader. */
  async open(principal: Principal, fleetId: string, period: Period): Promise<PeriodReader> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
    return new PeriodReader(this.deps.db, fleetId, period)
  }

  /** Refuses a caller who may not see the fleet's payouts, before its statement is even read. */
  async authorize(principal: Principal, fleetId: string): Promise<void> {
    await fleetMoneyVisibleTo(this.deps.db, principal, fleetId)
  }

  /** Compares the operator's statement with our lines of the period; stores nothing. */
  async compare(principal: Principal, fleetId: string, period: Period, statement: Map<string, number>): Promise<StatementComparison> {
    const reader = await this.open(principal, fleetId, period)
    const theirs = new Map(statement)
    const result: StatementComparison = {
      ...period,
      matched: 0,
      mismatched: [],
      missing_from_statement: [],
      unknown_in_statement: [],
      totals: { ours: 0, theirs: 0, difference: 0 },
    }
    for (const payout of statement.values()) result.totals.theirs += payout
    for await (const line of reader.lines()) {
      result.totals.ours += line.payout_cents
      const their = theirs.get(line.delivery_id)
      if (their === undefined) {
        result.missing_from_statement.push({ delivery_id: line.delivery_id, ours: line.payout_cents })
        continue
      }
      theirs.delete(line.delivery_id)
      if (their === line.payout_cents) result.matched++
      else
        result.mismatched.push({
          delivery_id: line.delivery_id,
          ours: line.payout_cents,
          theirs: their,
          difference: their - line.payout_cents,
        })
    }
    for (const [delivery_id, payout] of theirs) result.unknown_in_statement.push({ delivery_id, theirs: payout })
    result.totals.difference = result.totals.theirs - result.totals.ours
    return result
  }
}

/** One fleet's period, read a chunk at a time in (ended_at, id) order. */
export class PeriodReader {
  readonly totals: Totals = { lines: 0, ...ZERO_LINE }
  private cards: Map<number, RateCardTerms> | undefined
  private currencyOf: string | null = null

  constructor(
    private readonly db: Db,
    readonly fleetId: string,
    readonly period: Period,
  ) {}

  /** The fleet's currency (one per fleet), null before its first rate card. */
  async currency(): Promise<string | null> {
    await this.loadCards()
    return this.currencyOf
  }

  /** The period's lines; `totals` is their sum once the iteration has ended. */
  async *lines(): AsyncGenerator<ReconciliationLine> {
    for await (const chunk of this.chunks()) yield* chunk
  }

  /** The same lines a store query's worth at a time (one await per chunk rather than per line). */
  async *chunks(): AsyncGenerator<ReconciliationLine[]> {
    const cards = await this.loadCards()
    let after: { ended_at: string; id: string } | null = null
    for (;;) {
      let query = this.db
        .selectFrom('deliveries')
        .select(['id', 'pharmacy_id', 'status', 'ended_at', 'rate_card_version', 'distance_m', 'after_hours', 'cold_chain_required'])
        .where('fleet_id', '=', this.fleetId)
        .where('ended_at', '>=', this.period.from)
        .where('ended_at', '<', this.period.to)
      if (after) {
        const { ended_at, id } = after
        // Keyset: `ended_at >= last` lets the (fleet_id, ended_at, id) index seek straight to the
        // next chunk (an OR alone made SQLite scan from the period's start every time); the OR
        // then only sorts out the rows that share the last end time.
        query = query.where('ended_at', '>=', ended_at).where((eb) => eb.or([eb('ended_at', '>', ended_at), eb('id', '>', id)]))
      }
      const rows = await query.orderBy('ended_at').orderBy('id').limit(CHUNK_ROWS).execute()
      const lines: ReconciliationLine[] = []
      for (const row of rows) {
        const outcome: Outcome = row.status === 'DELIVERED' ? 'delivered' : 'failed'
        const card = row.rate_card_version === null ? undefined : cards.get(row.rate_card_version)
        const inputs = {
          outcome,
          cold_chain: row.cold_chain_required === 1,
          distance_m: row.distance_m,
          after_hours: row.after_hours === 1,
        }
        const price = card ? priceLine(card, inputs) : ZERO_LINE
        this.add(price)
        lines.push({
          delivery_id: row.id,
          pharmacy_id: row.pharmacy_id,
          outcome,
          ended_at: row.ended_at!,
          rate_card_version: card ? row.rate_card_version : null,
          distance_km: row.distance_m === null ? null : row.distance_m / 1000,
          after_hours: inputs.after_hours,
          cold_chain: inputs.cold_chain,
          ...price,
        })
      }
      if (lines.length) yield lines
      if (rows.length < CHUNK_ROWS) return
      const last = rows.at(-1)!
      after = { ended_at: last.ended_at!, id: last.id }
    }
  }

  private add(price: PriceLine): void {
    this.totals.lines++
    for (const name of AMOUNTS) this.totals[name] += price[name]
  }

  private async loadCards(): Promise<Map<number, RateCardTerms>> {
    if (this.cards) return this.cards
    const rows = await this.db.selectFrom('rate_cards').selectAll().where('fleet_id', '=', this.fleetId).orderBy('version').execute()
    this.cards = new Map(rows.map((row) => [row.version, row]))
    this.currencyOf = rows.at(-1)?.currency ?? null
    return this.cards
  }
}

/** CSV columns, in order (RFC 4180; every value is a number, a boolean or an id, so none needs quoting). */
export const CSV_COLUMNS = [
  'delivery_id',
  'pharmacy_id',
  'outcome',
  'ended_at',
  'rate_card_version',
  'distance_km',
  'after_hours',
  'cold_chain',
  ...AMOUNTS,
] as const

export const csvRow = (line: ReconciliationLine): string =>
  CSV_COLUMNS.map((name) => (line[name] === null ? '' : String(line[name]))).join(',') + '\r\n'
