import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { chainEvent, verifyChain, type ChainVerdict, type CustodyEvent } from '../domain/custody.js'
import { decideHandover } from '../domain/custody-rules.js'
import { storedFigures, type ColdChain, type ColdChainFigures, type Disposition } from '../domain/cold-chain.js'
import { planMove, type DeliveryStatus } from '../domain/delivery-machine.js'
import { AppError, validationFailed, type FieldError } from '../errors.js'
import { jcsHash, sha256Hex } from '../hashing.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import { isUniqueViolation } from '../store/errors.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { decodeCursor, encodeCursor, paginate, type Page, type PageRequest } from '../store/pagination.js'
import { sql, type SelectQueryBuilder } from 'kysely'
import { custodyRow, toCustodyEvent } from '../store/custody-rows.js'
import { canSee } from '../auth/tenancy.js'
import { visibleDelivery } from './delivery-visibility.js'
import { distanceMetres, isAfterHours, type LatLng } from '../domain/pricing.js'
import { rateCardInForce } from './rate-cards.js'
import { checkUserParties } from './user-parties.js'

export type Delivery = {
  id: string
  rx_id: string
  pharmacy_id: string
  status: DeliveryStatus
  eta: string
  fleet_id: string | null
  driver_id: string | null
  tote_id: string | null
  cold_chain: ColdChain
  custody: CustodyEvent[]
  created_at: string
  updated_at: string
}

type Location = { lat: number; lng: number }
type Common = { occurred_at?: string | undefined; location?: Location | undefined }
export type ActionInput =
  | ({ action: 'dispatch'; fleet_id: string; driver_id?: string | undefined; tote_id?: string | undefined } & Common)
  | ({ action: 'pickup' | 'handoff' | 'return'; from: string; to: string; signature: string } & Common)
  | ({ action: 'deliver'; verification: { method: 'otp' | 'id_check' | 'signature'; evidence: string } } & Common)
  | ({ action: 'fail' | 'cancel'; reason: string } & Common)
  | ({ action: 'disposition'; decision: 'release' | 'return'; note: string } & Common)

// The ends a fleet is paid for; a cancelled delivery was never carried (docs/fleet.md, Pricing).
const PRICED_ENDINGS: readonly DeliveryStatus[] = ['DELIVERED', 'FAILED', 'RETURNED']

// Drivers' phones and our clock disagree a little; an occurred_at this far ahead is still "now".
const CLOCK_SKEW_MS = 5_000
// Optimistic concurrency: a transition that lost a race re-reads and re-decides this many times.
const MAX_ATTEMPTS = 5

/** Delivery reads and the actions of docs/api.md (Deliveries and the chain of custody), each appending to the custody chain. */
export class DeliveryService {
  constructor(
    private readonly deps: ServiceDeps,
    /** Told after a dispatch binds a tote or an ending releases it, so telemetry re-reads the binding. */
    private readonly toteBindingChanged: (toteId: string, deliveryId: string) => void = () => {},
  ) {}

  async get(principal: Principal, id: string): Promise<Delivery> {
    const row = await this.deps.db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst()
    return toDelivery(visibleDelivery(principal, row), await this.custody(this.deps.db, id))
  }

  async list(principal: Principal, filter: DeliveryFilter, page: PageRequest): Promise<Page<Delivery>> {
    const { db, dialect } = this.deps
    let query = db.selectFrom('deliveries').selectAll()
    if (principal.pharmacyId) query = query.where('pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('fleet_id', '=', principal.fleetId)
    if (principal.driverId) query = query.where('driver_id', '=', principal.driverId)
    if (filter.status) query = query.where('status', '=', filter.status)
    if (filter.pharmacy_id) query = query.where('pharmacy_id', '=', filter.pharmacy_id)
    if (filter.cold_chain_state) {
      const state = dialect === 'postgres' ? sql<string>`(cold_chain::jsonb ->> 'state')` : sql<string>`json_extract(cold_chain, '$.state')`
      query = query.where(state, '=', filter.cold_chain_state)
    }
    if (filter.created_from) query = query.where('created_at', '>=', filter.created_from)
    if (filter.created_to) query = query.where('created_at', '<', filter.created_to)
    const result = filter.order === 'attention' ? await attentionPage(query, page) : await paginate(query, 'id', page)
    const ids = result.data.map((r) => r.id)
    const custody = ids.length
      ? await db.selectFrom('custody_events').selectAll().where('delivery_id', 'in', ids).orderBy('seq').execute()
      : []
    const byDelivery = new Map<string, CustodyEvent[]>()
    for (const row of custody) byDelivery.set(row.delivery_id, [...(byDelivery.get(row.delivery_id) ?? []), toCustodyEvent(row)])
    return { data: result.data.map((r) => toDelivery(r, byDelivery.get(r.id) ?? [])), next_cursor: result.next_cursor }
  }

  /**
   * Who the delivery's custody chain names (`from`, `to`, `actor.sub`, the disposition's decider),
   * with their names, so a timeline reads "Pat Pharmacist → Dana Driver". Only parties the chain
   * already names, of a delivery the caller may see: no directory of the tenant's people.
   */
  async parties(principal: Principal, id: string): Promise<{ data: { id: string; kind: 'user' | 'driver' | 'pharmacy'; name: string }[] }> {
    const delivery = await this.get(principal, id)
    const ids = new Set<string>()
    for (const e of delivery.custody) for (const p of [e.from, e.to, e.actor.sub]) if (p) ids.add(p)
    if (delivery.cold_chain.disposition) ids.add(delivery.cold_chain.disposition.decided_by.sub)
    const of = (prefix: string) => [...ids].filter((p) => p.startsWith(prefix))
    const db = this.deps.db
    const [users, drivers, pharmacies] = await Promise.all([
      of('us_').length ? db.selectFrom('users').select(['id', 'name']).where('id', 'in', of('us_')).execute() : [],
      of('dr_').length ? db.selectFrom('drivers').select(['id', 'name']).where('id', 'in', of('dr_')).execute() : [],
      of('ph_').length ? db.selectFrom('pharmacies').select(['id', 'name']).where('id', 'in', of('ph_')).execute() : [],
    ])
    return {
      data: [
        ...users.map((u) => ({ id: u.id, kind: 'user' as const, name: u.name })),
        ...drivers.map((d) => ({ id: d.id, kind: 'driver' as const, name: d.name })),
        ...pharmacies.map((p) => ({ id: p.id, kind: 'pharmacy' as const, name: p.name })),
      ],
    }
  }

  async verifyCustody(principal: Principal, id: string): Promise<ChainVerdict> {
    const row = await this.deps.db
      .selectFrom('deliveries')
      .innerJoin('prescriptions', 'prescriptions.id', 'deliveries.rx_id')
      .select(['deliveries.pharmacy_id', 'deliveries.fleet_id', 'deliveries.driver_id', 'prescriptions.audit_hash'])
      .where('deliveries.id', '=', id)
      .executeTakeFirst()
    const visible = visibleDelivery(principal, row)
    return verifyChain(visible.audit_hash, await this.custody(this.deps.db, id))
  }

  /**
   * Applies one action; concurrent actions on a delivery leave one winner and an intact chain.
   * Answers the delivery as the action's commit left it, which `record` keeps in that commit.
   */
  async act(principal: Principal, id: string, input: ActionInput, record?: RecordAnswer<Delivery>): Promise<Delivery> {
    try {
      return await this.applyAction(principal, id, input, record)
    } catch (error) {
      if (isRefusedHandoff(input, error)) await this.recordRefusal(principal, id, input as HandoffInput, error)
      throw error
    }
  }

  private async applyAction(principal: Principal, id: string, input: ActionInput, record?: RecordAnswer<Delivery>): Promise<Delivery> {
    for (let attempt = 1; ; attempt++) {
      try {
        const done = await this.tryAct(principal, id, input, record)
        if (done) {
          this.deps.outbox.committed(done.messages)
          if (done.boundTote) this.toteBindingChanged(done.boundTote, id)
          return done.delivery
        }
      } catch (error) {
        if (!isUniqueViolation(error) || attempt >= MAX_ATTEMPTS) throw error
      }
      if (attempt >= MAX_ATTEMPTS) throw new AppError('conflict', 'The delivery changed while this action was applied; retry.')
    }
  }

  /**
   * A refused pickup, handoff or deliver leaves a `handoff.refused` event (docs/api.md, Refused
   * handoffs), committed on its own after the refusal: the action changed nothing, so the custody
   * chain gets no link (it records who held the goods, and nobody new did); the event takes the
   * delivery's next event `seq`, so a consumer still sees every event of the delivery numbered
   * without a gap. A failure to record it is logged; the caller still gets the refusal.
   */
  private async recordRefusal(principal: Principal, id: string, input: HandoffInput, error: AppError): Promise<void> {
    try {
      const now = iso(this.deps.clock.now())
      const messages = await this.deps.db.transaction().execute(async (trx) => {
        const row = await trx
          .selectFrom('deliveries')
          .select(['pharmacy_id', 'fleet_id', 'driver_id', 'rx_id', 'status'])
          .where('id', '=', id)
          .executeTakeFirst()
        if (!row || !canSee(principal, row) || (principal.driverId && row.driver_id !== principal.driverId)) return 0
        const errors = Array.isArray(error.extra.errors) ? (error.extra.errors as FieldError[]) : []
        // A 422's detail is generic; its reason is what each refused member says.
        const reason = errors.length ? errors.map((e) => e.message).join('; ') : error.message
        const { messages } = await this.deps.outbox.append(trx, [
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
      this.deps.outbox.committed(messages)
    } catch (err) {
      this.deps.logger.warn({ err, deliveryId: id, action: input.action }, 'recording a refused handoff failed')
    }
  }

  /** One optimistic attempt: false when another action got there first; else what to announce. */
  private async tryAct(
    principal: Principal,
    id: string,
    input: ActionInput,
    record?: RecordAnswer<Delivery>,
  ): Promise<false | { messages: number; boundTote: string | null; delivery: Delivery }> {
    const db = this.deps.db
    const row = await db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst()
    const delivery = visibleDelivery(principal, row)
    const chain = await this.custody(db, id)
    const summary = fromJson<ColdChainFigures>(delivery.cold_chain)
    const disposition = fromJson<Disposition | null>(delivery.disposition)
    const move = planMove(
      {
        status: delivery.status as DeliveryStatus,
        coldChainState: summary.state,
        released: disposition?.decision === 'release',
        decided: disposition !== null,
      },
      input.action,
    )

    const now = this.deps.clock.now()
    const head = chain.at(-1)!
    const occurredAt = 'occurred_at' in input ? checkOccurredAt(input.occurred_at, head.occurred_at, now) : iso(now)
    const changes: Partial<Database['deliveries']> = { status: move.status, updated_at: iso(now), version: delivery.version + 1 }
    const parties = await this.partiesOf(principal, delivery, chain, input, occurredAt, changes)
    if (move.ends && delivery.tote_id) changes.bound_to = occurredAt
    if (PRICED_ENDINGS.includes(move.status) && delivery.ended_at === null)
      Object.assign(changes, await this.pricingAtEnd(delivery, chain, input, occurredAt, iso(now)))

    const custodyEvent = chainEvent(head.hash, {
      seq: head.seq + 1,
      type: move.custody,
      actor: { client_id: principal.clientId, sub: principal.sub },
      from: parties.from,
      to: parties.to,
      location: ('location' in input && input.location) || null,
      evidence_hash: parties.evidence_hash,
      occurred_at: occurredAt,
      recorded_at: iso(now),
    })
    const eventData = {
      status: move.status,
      previous_status: delivery.status,
      action: input.action,
      occurred_at: occurredAt,
      from: parties.from,
      to: parties.to,
      custody_seq: custodyEvent.seq,
      custody_hash: custodyEvent.hash,
      ...('reason' in input ? { reason: input.reason } : {}),
      ...(input.action === 'disposition' ? { decision: input.decision } : {}),
      ...(input.action === 'deliver' ? { verification_method: input.verification.method } : {}),
      ...(input.action === 'dispatch'
        ? { fleet_id: changes.fleet_id, driver_id: changes.driver_id ?? null, tote_id: changes.tote_id ?? null }
        : {}),
    }

    return db.transaction().execute(async (trx) => {
      // docs/fleet.md, Pricing: the version in force at the dispatch, read and recorded by the dispatch's own commit.
      if (input.action === 'dispatch') changes.rate_card_version = (await rateCardInForce(trx, input.fleet_id, occurredAt))?.version ?? null
      const updated = await trx
        .updateTable('deliveries')
        .set(changes)
        .where('id', '=', id)
        .where('version', '=', delivery.version)
        .executeTakeFirst()
      if (Number(updated.numUpdatedRows) === 0) return false
      await trx.insertInto('custody_events').values(custodyRow(id, custodyEvent)).execute()
      const { messages } = await this.deps.outbox.append(
        trx,
        move.events.map((type) => ({
          type,
          pharmacy_id: delivery.pharmacy_id,
          fleet_id: changes.fleet_id ?? delivery.fleet_id,
          delivery_id: id,
          rx_id: delivery.rx_id,
          data: eventData,
        })),
      )
      const boundTote = changes.tote_id ?? (changes.bound_to ? delivery.tote_id : null)
      // The version check above makes this the row and chain as this commit leaves them.
      const answer = toDelivery({ ...delivery, ...changes }, [...chain, toCustodyEvent(custodyRow(id, custodyEvent))])
      await record?.(trx, answer)
      return { messages, boundTote, delivery: answer }
    })
  }

  /** Validates who hands the goods to whom, and what each action changes besides the status. */
  private async partiesOf(
    principal: Principal,
    delivery: Database['deliveries'],
    chain: CustodyEvent[],
    input: ActionInput,
    occurredAt: string,
    changes: Partial<Database['deliveries']>,
  ): Promise<{ from: string | null; to: string | null; evidence_hash: string | null }> {
    const handover = decideHandover(delivery, chain, input)
    if (!handover.ok) throw validationFailed([{ pointer: handover.pointer, message: handover.message }])
    if (handover.driver) await this.checkDriver(delivery, handover.driver.id, handover.driver.pointer)
    const parties = { from: handover.from, to: handover.to }
    if ('from' in input) await checkUserParties(this.deps.db, delivery, input)
    switch (input.action) {
      case 'dispatch': {
        await this.checkDispatch(principal, delivery, input, occurredAt)
        Object.assign(changes, {
          fleet_id: input.fleet_id,
          driver_id: input.driver_id ?? null,
          tote_id: input.tote_id ?? null,
          bound_from: input.tote_id ? occurredAt : null,
        })
        return { ...parties, evidence_hash: null }
      }
      case 'pickup':
      case 'handoff':
      case 'return':
        return { ...parties, evidence_hash: evidenceHash(input.signature) }
      case 'deliver':
        // The method is hashed with the evidence so neither can be swapped later.
        return { ...parties, evidence_hash: jcsHash({ method: input.verification.method, evidence: input.verification.evidence }) }
      case 'fail':
      case 'cancel':
        return { ...parties, evidence_hash: evidenceHash(input.reason) }
      case 'disposition': {
        const disposition: Disposition = {
          decision: input.decision,
          note: input.note,
          decided_by: { client_id: principal.clientId, sub: principal.sub },
          decided_at: occurredAt,
        }
        changes.disposition = toJson(disposition)
        return { ...parties, evidence_hash: jcsHash({ decision: input.decision, note: input.note }) }
      }
    }
  }

  /**
   * What pricing needs, fixed when a delivery first ends as DELIVERED, FAILED or RETURNED
   * (docs/fleet.md, Pricing): when the end was recorded (its reconciliation period), the
   * great-circle distance from the pickup (its custody location, else the pharmacy's) to where
   * it ended, whether it ended after hours in the pharmacy's time zone, and whether a delivery
   * reached the patient by its `eta`. A later RETURNED after FAILED keeps the first end's facts.
   */
  private async pricingAtEnd(
    delivery: Database['deliveries'],
    chain: CustodyEvent[],
    input: ActionInput,
    occurredAt: string,
    recordedAt: string,
  ): Promise<Partial<Database['deliveries']>> {
    const pharmacy = await this.deps.db
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

  private async checkDispatch(
    principal: Principal,
    delivery: Database['deliveries'],
    input: Extract<ActionInput, { action: 'dispatch' }>,
    occurredAt: string,
  ) {
    const db = this.deps.db
    const fleet = await db.selectFrom('fleets').select('id').where('id', '=', input.fleet_id).executeTakeFirst()
    if (!fleet || (principal.fleetId && principal.fleetId !== fleet.id))
      throw validationFailed([{ pointer: '/fleet_id', message: `no fleet ${input.fleet_id}` }])
    if (input.driver_id) await this.checkDriver({ ...delivery, fleet_id: input.fleet_id }, input.driver_id, '/driver_id')
    if (delivery.cold_chain_required && !input.tote_id)
      throw validationFailed([{ pointer: '/tote_id', message: 'is required for a cold-chain delivery' }])
    if (!input.tote_id) return
    const tote = await db.selectFrom('totes').select(['id', 'pharmacy_id', 'fleet_id']).where('id', '=', input.tote_id).executeTakeFirst()
    if (!tote || !(tote.pharmacy_id === delivery.pharmacy_id || tote.fleet_id === input.fleet_id)) {
      throw validationFailed([{ pointer: '/tote_id', message: `no tote ${input.tote_id} of this pharmacy or fleet` }])
    }
    const open = await db
      .selectFrom('deliveries')
      .select(['id', 'pharmacy_id', 'fleet_id'])
      .where('tote_id', '=', tote.id)
      .where('bound_to', 'is', null)
      .executeTakeFirst()
    if (open) {
      // A fleet's tote may be busy with another pharmacy's delivery: name it only to whoever may see it.
      const busyWith = canSee(principal, open) ? `the open delivery ${open.id}` : 'another open delivery'
      throw new AppError('conflict', `Tote ${tote.id} is bound to ${busyWith}.`, {
        errors: [{ pointer: '/tote_id', message: `bound to ${busyWith}` }],
      })
    }
    const last = await db
      .selectFrom('deliveries')
      .select('bound_to')
      .where('tote_id', '=', tote.id)
      .orderBy('bound_to', 'desc')
      .limit(1)
      .executeTakeFirst()
    if (last?.bound_to && last.bound_to > occurredAt) {
      throw validationFailed([{ pointer: '/occurred_at', message: `tote ${tote.id} was still on another delivery until ${last.bound_to}` }])
    }
  }

  private async checkDriver(delivery: Pick<Database['deliveries'], 'fleet_id'>, driverId: string, pointer: string) {
    const driver = await this.deps.db.selectFrom('drivers').select('fleet_id').where('id', '=', driverId).executeTakeFirst()
    if (!driver || driver.fleet_id !== delivery.fleet_id)
      throw validationFailed([{ pointer, message: `${driverId} is not a driver of fleet ${delivery.fleet_id}` }])
  }

  private async custody(db: Executor, deliveryId: string): Promise<CustodyEvent[]> {
    const rows = await db.selectFrom('custody_events').selectAll().where('delivery_id', '=', deliveryId).orderBy('seq').execute()
    return rows.map(toCustodyEvent)
  }
}

export type DeliveryFilter = {
  status?: string | undefined
  pharmacy_id?: string | undefined
  /** The cold chain's state (OK, EXCURSION, BROKEN, UNMONITORED). */
  cold_chain_state?: string | undefined
  /** Created at or after / before these instants (RFC 3339 UTC, compared as text like every stored time). */
  created_from?: string | undefined
  created_to?: string | undefined
  /** `attention`: the pharmacist's queue (BROKEN undecided, then EXCURSION, then the rest; newest first in each). Default: by id. */
  order?: 'id' | 'attention' | undefined
}

/**
 * Keyset pagination over (attention asc, id desc), the index of migration 0012; the cursor
 * carries both keys (`<rank>.<id>`).
 */
async function attentionPage<O extends { id: string }>(
  query: SelectQueryBuilder<Database, 'deliveries', O>,
  { limit, cursor }: PageRequest,
): Promise<Page<O>> {
  // A generated column (never written, so not in the Database type the writers use).
  const attention = sql<number>`attention`
  let q = query.select(attention.as('attention_rank'))
  if (cursor) {
    const [rank, id] = decodeCursor(cursor).split('.')
    if (!/^[0-2]$/.test(rank ?? '') || !id)
      throw validationFailed([{ pointer: '/query/cursor', message: 'is not a cursor this API returned' }])
    q = q.where((eb) => eb.or([eb(attention, '>', Number(rank)), eb.and([eb(attention, '=', Number(rank)), eb('id', '<', id)])]))
  }
  const rows = await q
    .orderBy(attention)
    .orderBy('id', 'desc')
    .limit(limit + 1)
    .execute()
  const data = rows.slice(0, limit)
  const last = data.at(-1)
  return { data, next_cursor: rows.length > limit && last ? encodeCursor(`${last.attention_rank}.${last.id}`) : null }
}

const evidenceHash = (text: string) => `sha256:${sha256Hex(text)}`

type HandoffInput = Extract<ActionInput, { action: 'pickup' | 'handoff' | 'deliver' }>

/**
 * A handoff the rules refused: a pickup, handoff or deliver answered 409 (wrong state, a cold
 * chain hold) or 422 by the service's own checks (who holds the goods, who may sign, when).
 * Not a 404 (the caller may not see the delivery) nor a lost race (`conflict`).
 */
function isRefusedHandoff(input: ActionInput, error: unknown): error is AppError {
  if (input.action !== 'pickup' && input.action !== 'handoff' && input.action !== 'deliver') return false
  return (
    error instanceof AppError &&
    (error.code === 'invalid_transition' || error.code === 'cold_chain_hold' || error.code === 'validation_failed')
  )
}

function checkOccurredAt(value: string | undefined, previous: string, nowMs: number): string {
  if (value === undefined) return iso(nowMs)
  const at = Date.parse(value)
  if (at > nowMs + CLOCK_SKEW_MS) throw validationFailed([{ pointer: '/occurred_at', message: 'may not be in the future' }])
  if (at < Date.parse(previous))
    throw validationFailed([{ pointer: '/occurred_at', message: `may not be before the previous custody event (${previous})` }])
  return iso(at)
}

export function toDelivery(row: Database['deliveries'], custody: CustodyEvent[]): Delivery {
  const required = row.cold_chain_required === 1
  const figures = storedFigures(required, fromJson<Partial<ColdChainFigures>>(row.cold_chain))
  return {
    id: row.id,
    rx_id: row.rx_id,
    pharmacy_id: row.pharmacy_id,
    status: row.status as DeliveryStatus,
    eta: row.eta,
    fleet_id: row.fleet_id,
    driver_id: row.driver_id,
    tote_id: row.tote_id,
    cold_chain: { required, profile: fromJson(row.profile), ...figures, disposition: fromJson(row.disposition) },
    custody,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }
}
