import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { attemptNumber } from '../domain/attempts.js'
import { storedFigures, type Disposition, type StoredColdChain } from '../domain/cold-chain.js'
import { chainEvent, verifyChain, type ChainVerdict, type HandoffTemperature } from '../domain/custody.js'
import { handoffTemperature } from '../domain/handoff-temperature.js'
import type { ReadingSink } from '../timeseries/sink.js'
import { EPCIS_CUSTODY_TYPES } from '../domain/epcis.js'
import { DEFAULT_MAX_ATTEMPTS, planMove, type DeliveryStatus } from '../domain/delivery-machine.js'
import { AppError } from '../errors.js'
import { custodyRow, toCustodyEvent } from '../store/custody-rows.js'
import { isUniqueViolation } from '../store/errors.js'
import type { Page, PageRequest } from '../store/pagination.js'
import type { RecordAnswer } from '../store/record-answer.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import { actionParties, checkOccurredAt } from './action-parties.js'
import type { ServiceDeps } from './context.js'
import { listDeliveries, type DeliveryExpansion, type DeliveryFilter } from './delivery-list.js'
import { readCustody, toDelivery, type ActionInput, type Delivery } from './delivery-shapes.js'
import { visibleDelivery } from './delivery-visibility.js'
import { isRefusedHandoff, recordRefusal, type HandoffInput } from './handoff-refusals.js'
import { isFirstPricedEnd, pricingAtEnd } from './pricing-at-end.js'
import { rateCardInForce } from './rate-cards.js'
import { signedCustodyEvent } from './custody-signatures.js'
import { automaticRelease } from './stability-release.js'
import { clearAlarmsOfDelivery } from '../alarms/alarm-records.js'
import type { DeliveryPins } from './delivery-pin.js'
import { forgetEtaState } from './driver-positions.js'

// Optimistic concurrency: a transition that lost a race re-reads and re-decides this many times.
const MAX_ATTEMPTS = 5

/** Delivery reads and the actions of docs/api.md (Deliveries and the chain of custody), each appending to the custody chain. */
export class DeliveryService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly pins: DeliveryPins,
    /** Told after a dispatch binds a tote or an ending releases it, so telemetry re-reads the binding. */
    private readonly toteBindingChanged: (toteId: string, deliveryId: string) => void = () => {},
    /** Where readings are stored: each custody event of a cold-chain delivery reads its newest one there. */
    private readonly sink?: Pick<ReadingSink, 'latestForDelivery'>,
  ) {}

  async get(principal: Principal, id: string): Promise<Delivery> {
    const row = await this.deps.db.selectFrom('deliveries').selectAll().where('id', '=', id).executeTakeFirst()
    return toDelivery(visibleDelivery(principal, row), await readCustody(this.deps.db, id))
  }

  list(
    principal: Principal,
    filter: DeliveryFilter,
    page: PageRequest,
    expand: readonly DeliveryExpansion[] = [],
  ): Promise<Page<Delivery>> {
    return listDeliveries(this.deps, principal, filter, page, expand)
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

  /** The time zone of the delivery's pharmacy, in which a person reads the delivery's times (the chart's clock). */
  async timeZoneOf(delivery: Pick<Delivery, 'pharmacy_id'>): Promise<string> {
    const row = await this.deps.db.selectFrom('pharmacies').select('timezone').where('id', '=', delivery.pharmacy_id).executeTakeFirst()
    return row?.timezone ?? 'UTC'
  }

  async verifyCustody(principal: Principal, id: string): Promise<ChainVerdict> {
    const row = await this.deps.db
      .selectFrom('deliveries')
      .innerJoin('prescriptions', 'prescriptions.id', 'deliveries.rx_id')
      .select(['deliveries.pharmacy_id', 'deliveries.fleet_id', 'deliveries.driver_id', 'prescriptions.audit_hash'])
      .where('deliveries.id', '=', id)
      .executeTakeFirst()
    const visible = visibleDelivery(principal, row)
    return verifyChain(visible.audit_hash, await readCustody(this.deps.db, id), id)
  }

  /**
   * The cold chain at `occurredAt` (docs/api.md, Temperature at each handoff): one read of the newest reading in the
   * delivery's binding interval up to that moment, never a scan of its readings.
   */
  private async temperatureAt(delivery: Database['deliveries'], figures: StoredColdChain, occurredAt: string): Promise<HandoffTemperature> {
    const upTo = Date.parse(occurredAt) + 1 // at or before: the sink's ranges are half-open
    const end = delivery.bound_to === null ? upTo : Math.min(upTo, Date.parse(delivery.bound_to))
    const reading =
      this.sink && delivery.bound_from !== null
        ? await this.sink.latestForDelivery(delivery.id, Date.parse(delivery.bound_from), end)
        : null
    return handoffTemperature(storedFigures(true, figures), reading, occurredAt)
  }

  /**
   * Applies one action; concurrent actions on a delivery leave one winner and an intact chain.
   * Answers the delivery as the action's commit left it, which `record` keeps in that commit.
   */
  async act(principal: Principal, id: string, input: ActionInput, record?: RecordAnswer<Delivery>): Promise<Delivery> {
    try {
      return await this.applyAction(principal, id, input, record)
    } catch (error) {
      if (isRefusedHandoff(input, error)) await recordRefusal(this.deps, principal, id, input as HandoffInput, error)
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
    const chain = await readCustody(db, id)
    const summary = fromJson<StoredColdChain>(delivery.cold_chain)
    const disposition = fromJson<Disposition | null>(delivery.disposition)
    const attempt = attemptNumber(chain)
    const move = planMove(
      {
        status: delivery.status as DeliveryStatus,
        coldChainState: summary.state,
        released: disposition?.decision === 'release',
        decided: disposition !== null,
        attempt,
        // Read whenever a reattempt could be asked for, so a refusal's allowed_actions names it only when allowed.
        maxAttempts: delivery.status === 'FAILED' ? await maxAttemptsOf(db, delivery.pharmacy_id) : undefined,
      },
      input.action,
    )

    const now = this.deps.clock.now()
    const head = chain.at(-1)!
    const occurredAt = 'occurred_at' in input ? checkOccurredAt(input.occurred_at, head.occurred_at, now) : iso(now)
    const changes: Partial<Database['deliveries']> = { status: move.status, updated_at: iso(now), version: delivery.version + 1 }
    const parties = await actionParties(db, this.pins, principal, delivery, chain, input, occurredAt, changes)
    if (move.ends && delivery.tote_id) changes.bound_to = occurredAt
    if (isFirstPricedEnd(move.status, delivery))
      Object.assign(changes, await pricingAtEnd(db, delivery, chain, input, occurredAt, iso(now)))

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
      ...(delivery.cold_chain_required === 1 ? { temperature: await this.temperatureAt(delivery, summary, occurredAt) } : {}),
      ...(input.action === 'fail' ? { attempt: { number: attempt, reason: input.reason, note: input.note ?? null } } : {}),
      ...(input.action === 'reattempt' ? { attempt: { number: attempt + 1 } } : {}),
      // Absent, not null, without proofs: the hash of such an event is computed as it always was.
      ...(parties.evidence ? { evidence: parties.evidence } : {}),
    })
    // docs/part11.md: a disposition is signed, and its signature follows it in the chain.
    const signed = input.action === 'disposition' ? signedCustodyEvent(id, custodyEvent, input.signer, principal, iso(now)) : null
    if (signed) changes.disposition = toJson({ ...fromJson<Disposition>(changes.disposition!), signature: signed.signature })
    const appended = signed ? [custodyEvent, signed.event] : [custodyEvent]
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
      ...(input.action === 'fail' ? { note: input.note ?? null, attempt } : {}),
      ...(input.action === 'reattempt' ? { attempt: attempt + 1, driver_id: changes.driver_id ?? delivery.driver_id } : {}),
      ...(input.action === 'disposition' ? { decision: input.decision } : {}),
      ...(signed ? { signature: signed.signature } : {}),
      ...(input.action === 'deliver' ? { verification_method: input.verification.method } : {}),
      ...(input.action === 'dispatch'
        ? { fleet_id: changes.fleet_id, driver_id: changes.driver_id ?? null, tote_id: changes.tote_id ?? null }
        : {}),
    }

    return db.transaction().execute(async (trx) => {
      // docs/fleet.md, Pricing: the version in force at the dispatch, read and recorded by the dispatch's own commit.
      if (input.action === 'dispatch') changes.rate_card_version = (await rateCardInForce(trx, input.fleet_id, occurredAt))?.version ?? null
      // docs/stability.md, Release: delivered within every item's stability budget, under auto_within_budget.
      if (move.status === 'DELIVERED') {
        const release = await automaticRelease(trx, id, summary, occurredAt)
        if (release) changes.release = JSON.stringify(release)
      }
      // The readings follow the binding after this commit; until they have, the change is pending.
      const boundTote = changes.tote_id ?? (changes.bound_to ? delivery.tote_id : null)
      if (boundTote) changes.follow_pending = changes.version!
      const updated = await trx
        .updateTable('deliveries')
        .set(changes)
        .where('id', '=', id)
        .where('version', '=', delivery.version)
        .executeTakeFirst()
      if (Number(updated.numUpdatedRows) === 0) return false
      if (parties.issuePin) await this.pins.issue(trx, id, occurredAt)
      if (input.action === 'reattempt') await forgetEtaState(trx, id)
      await trx
        .insertInto('custody_events')
        .values(appended.map((e) => custodyRow(id, e)))
        .execute()
      const epcisEvents = appended.filter((e) => EPCIS_CUSTODY_TYPES.includes(e.type))
      if (epcisEvents.length) {
        await trx
          .insertInto('epcis_events')
          .values(
            epcisEvents.map((e) => ({
              delivery_id: id,
              seq: e.seq,
              pharmacy_id: delivery.pharmacy_id,
              fleet_id: changes.fleet_id ?? delivery.fleet_id,
              recorded_at: e.recorded_at,
            })),
          )
          .execute()
      }
      // docs/api.md, Alarms: a disposition decides the delivery, which clears its alarms still active.
      if (input.action === 'disposition') await clearAlarmsOfDelivery(trx, id, occurredAt)
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
      // The version check above makes this the row and chain as this commit leaves them.
      const answer = toDelivery({ ...delivery, ...changes }, [...chain, ...appended.map((e) => toCustodyEvent(custodyRow(id, e)))])
      await record?.(trx, answer)
      return { messages, boundTote, delivery: answer }
    })
  }
}

/** The pharmacy's `max_attempts` (docs/api.md, Attempts). */
async function maxAttemptsOf(db: Executor, pharmacyId: string): Promise<number> {
  const row = await db.selectFrom('pharmacies').select('max_attempts').where('id', '=', pharmacyId).executeTakeFirst()
  return row?.max_attempts ?? DEFAULT_MAX_ATTEMPTS
}
