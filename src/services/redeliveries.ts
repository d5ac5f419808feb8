import { startLedger, summarizeStability, type StabilityPlan } from '../../rules/index.js'
import type { Principal } from '../auth/scopes.js'
import { visibleOr404 } from '../auth/tenancy.js'
import { iso } from '../clock.js'
import { initialColdChain, type Disposition } from '../domain/cold-chain.js'
import { chainEvent } from '../domain/custody.js'
import { AppError } from '../errors.js'
import { newId } from '../ids.js'
import { custodyRow } from '../store/custody-rows.js'
import { beforeAnyReading } from '../domain/handoff-temperature.js'
import { isUniqueViolation } from '../store/errors.js'
import { insertRow } from '../store/precompiled.js'
import type { RecordAnswer } from '../store/record-answer.js'
import { fromJson, toJson, type Database } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/sink.js'
import type { ServiceDeps } from './context.js'
import { readCustody, toDelivery, type Delivery } from './delivery-shapes.js'
import { legLedger } from './leg-ledger.js'

// The new leg's ETA, as for a new prescription without deliver_by: same day, within this many hours.
const DEFAULT_ETA_HOURS = 4

/**
 * Sends a returned prescription out again (docs/stability.md, Redelivery): a new delivery of the same
 * prescription, `leg` n + 1, queued and then dispatched like any other, whose stability ledger starts
 * from what the earlier legs consumed.
 */
export class RedeliveryService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly sink: ReadingSink,
  ) {}

  async redeliver(principal: Principal, rxId: string, record?: RecordAnswer<Delivery>): Promise<Delivery> {
    const { db, clock, outbox } = this.deps
    const prescription = visibleOr404(
      principal,
      await db.selectFrom('prescriptions').selectAll().where('id', '=', rxId).executeTakeFirst(),
      'prescription',
    )
    const latest = await db
      .selectFrom('deliveries')
      .selectAll()
      .where('rx_id', '=', rxId)
      .orderBy('leg', 'desc')
      .limit(1)
      .executeTakeFirstOrThrow()
    refuseUnlessReleased(latest)
    const planRow = await db.selectFrom('delivery_stability').select('plan').where('delivery_id', '=', latest.id).executeTakeFirst()
    const deliveryId = newId('dl')
    const plan = planRow ? await this.nextPlan(latest, JSON.parse(planRow.plan) as StabilityPlan, deliveryId) : null

    const now = clock.now()
    const createdAt = iso(now)
    const eta = iso(now + DEFAULT_ETA_HOURS * 3_600_000)
    const required = latest.cold_chain_required === 1
    const row: Database['deliveries'] = {
      id: deliveryId,
      rx_id: rxId,
      pharmacy_id: latest.pharmacy_id,
      status: 'QUEUED',
      eta,
      fleet_id: null,
      driver_id: null,
      tote_id: null,
      cold_chain_required: latest.cold_chain_required,
      profile: latest.profile,
      cold_chain: toJson(
        plan ? { ...initialColdChain(true), stability: summarizeStability(startLedger(plan, null)) } : initialColdChain(required),
      ),
      disposition: null,
      bound_from: null,
      bound_to: null,
      release: null,
      live_eta: null,
      warnings: null, // a new leg's dispatch judges its own tote
      leg: latest.leg + 1,
      version: 1,
      event_seq: 1,
      created_at: createdAt,
      updated_at: createdAt,
      rate_card_version: null,
      ended_at: null,
      distance_m: null,
      after_hours: null,
      on_time: null,
    }
    // The new leg's chain starts, like the first's, from the prescription as received.
    const first = chainEvent(prescription.audit_hash, {
      seq: 1,
      type: 'created',
      actor: { client_id: principal.clientId, sub: principal.sub },
      from: null,
      to: latest.pharmacy_id,
      location: null,
      evidence_hash: null,
      occurred_at: createdAt,
      recorded_at: createdAt,
      ...(required ? { temperature: beforeAnyReading } : {}),
    })
    try {
      const { messages, delivery } = await db.transaction().execute(async (trx) => {
        // leg n + 1 is unique per prescription: of two concurrent redeliveries one inserts, the other is refused.
        await insertRow(trx, 'deliveries', row)
        if (plan)
          await trx
            .insertInto('delivery_stability')
            .values({ delivery_id: deliveryId, plan: toJson(plan) })
            .execute()
        await trx.insertInto('custody_events').values(custodyRow(deliveryId, first)).execute()
        // GET /v1/prescriptions/{id} follows the latest leg.
        await trx.updateTable('prescriptions').set({ delivery_id: deliveryId }).where('id', '=', rxId).execute()
        const appended = await outbox.append(trx, [
          {
            type: 'delivery.created',
            pharmacy_id: latest.pharmacy_id,
            delivery_id: deliveryId,
            rx_id: rxId,
            seq: 1,
            data: {
              status: 'QUEUED',
              cold_chain: required,
              profile: fromJson<{ name: string } | null>(latest.profile)?.name ?? null,
              eta,
              audit_hash: prescription.audit_hash,
              leg: row.leg,
            },
          },
        ])
        const answer = toDelivery(row, await readCustody(trx, deliveryId))
        await record?.(trx, answer)
        return { messages: appended.messages, delivery: answer }
      })
      outbox.committed(messages)
      return delivery
    } catch (error) {
      if (isUniqueViolation(error)) throw new AppError('conflict', `Leg ${row.leg} of this prescription was created meanwhile.`)
      throw error
    }
  }

  /** The earlier legs' ledger carried into the new leg; refused when an item is exhausted (assessments included). */
  private async nextPlan(latest: Database['deliveries'], plan: StabilityPlan, deliveryId: string): Promise<StabilityPlan> {
    const carried = await legLedger(this.sink, latest, plan)
    if (carried === null) return { ...plan, carried: null, add_backs: [], legs: [...plan.legs, deliveryId] }
    const exhausted = carried.items.filter((item) => item.exhausted !== null)
    if (exhausted.length > 0)
      throw new AppError(
        'stability_exhausted',
        'An item of this prescription has exhausted its stability budget: it may not go out again.',
        {
          items: exhausted.map((item) => ({ ndc: item.ndc, product_id: item.product_id, reason: item.exhausted!.reason })),
        },
      )
    return { items: plan.items, carried, legs: [...plan.legs, deliveryId], ...(plan.auto === undefined ? {} : { auto: plan.auto }) }
  }
}

/** Only goods that came back and that a person released may go out again. */
function refuseUnlessReleased(latest: Database['deliveries']): void {
  const at = { status_now: latest.status, leg: latest.leg, delivery_id: latest.id }
  if (latest.status !== 'RETURNED')
    throw new AppError(
      'not_released',
      `Leg ${latest.leg} of this prescription is ${latest.status}: only a returned delivery is sent out again.`,
      at,
    )
  const disposition = fromJson<Disposition | null>(latest.disposition)
  if (disposition?.decision !== 'release' || !disposition.decided_by.sub.startsWith('us_'))
    throw new AppError(
      'not_released',
      'The returned delivery has no release by a person: a pharmacist records a "release" disposition before it goes out again.',
      at,
    )
}
