import { startLedger, summarizeStability, type AddBack, type StabilityPlan } from '../../rules/index.js'
import type { Signer } from '../auth/e-signatures.js'
import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import type { StoredColdChain } from '../domain/cold-chain.js'
import { normalizeNdc } from '../domain/ndc.js'
import type { CustodyEvent, StoredSignature } from '../domain/custody.js'
import type { AssessmentRecord } from '../domain/e-signature.js'
import { AppError, notFound, validationFailed } from '../errors.js'
import { newId } from '../ids.js'
import { isUniqueViolation } from '../store/errors.js'
import type { RecordAnswer } from '../store/record-answer.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import type { ReadingSink } from '../timeseries/sink.js'
import type { ServiceDeps } from './context.js'
import { visibleDelivery } from './delivery-visibility.js'
import { legLedger } from './leg-ledger.js'
import { readCustody } from './delivery-shapes.js'
import { appendSignedAssessment, assessmentSignatureVerified } from './sign-assessment.js'

export type NewAssessment = { ndc: string; band: number; add_back_s: number; justification: string }

export type Assessment = NewAssessment & {
  id: string
  delivery_id: string
  assessed_by: { client_id: string; sub: string }
  created_at: string
  withdrawn_by: { client_id: string; sub: string } | null
  withdrawn_at: string | null
  /** The pharmacist's e-signature (meaning `assessed`); null only on assessments made before signing. */
  signature: StoredSignature | null
  /** The e-signature of the withdrawal (meaning `assessed`), once withdrawn. */
  withdrawal_signature: StoredSignature | null
  /** The signature is the one the custody chain holds for exactly this content (recomputed on every read). */
  signature_verified: boolean
}

/** A chain append raced another on the same delivery: the (delivery_id, seq) key refuses the loser, which tries again. */
const MAX_ATTEMPTS = 5

/** Told when a delivery's plan changed, so the rule engine judges its next readings with the new budget. */
export type PlanChanged = (delivery: { id: string; tote_id: string | null }, plan: StabilityPlan) => void

/**
 * Excursion assessments (docs/stability.md): a pharmacist gives budget back to one band of one item
 * of a delivery's latest leg, or withdraws it. The assessments in force are the plan's `add_backs`;
 * the ledger is recomputed from the stored readings with them (never editing a reading). A break
 * already announced stands: the ledger shows the assessed remaining and the disposition stays a person's.
 */
export class AssessmentService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly sink: ReadingSink,
    private readonly planChanged: PlanChanged,
  ) {}

  /** `signer` was authenticated by the route (src/auth/e-signatures.ts) with the meaning `assessed`. */
  async create(
    principal: Principal,
    deliveryId: string,
    input: NewAssessment,
    signer: Signer,
    record?: RecordAnswer<Assessment>,
  ): Promise<Assessment> {
    const { db, clock } = this.deps
    const delivery = await this.latestLeg(principal, deliveryId)
    const id = newId('as')
    const plan = await planOf(db, deliveryId)
    const ndc = normalizeNdc(input.ndc)
    const item = plan?.items.find((i) => i.ndc === ndc)
    if (!plan || !item) throw validationFailed([{ pointer: '/ndc', message: 'names no item of this delivery judged by a product' }])
    if (input.band >= item.stability.budgets.length)
      throw validationFailed([
        { pointer: '/band', message: `the item's product has ${item.stability.budgets.length} band(s), numbered from 0` },
      ])
    const unsigned = {
      id,
      delivery_id: deliveryId,
      ndc: item.ndc,
      band: input.band,
      add_back_s: input.add_back_s,
      justification: input.justification,
      assessed_by: { client_id: principal.clientId, sub: principal.sub },
      created_at: iso(clock.now()),
      withdrawn_by: null,
      withdrawn_at: null,
    }
    const { assessment, next } = await retryOnChainRace(() =>
      db.transaction().execute(async (trx) => {
        const signature = await appendSignedAssessment(trx, recordOf(unsigned, 'assess'), signer, principal, unsigned.created_at)
        const assessment: Assessment = { ...unsigned, signature, withdrawal_signature: null, signature_verified: true }
        await trx
          .insertInto('stability_assessments')
          .values({
            id,
            delivery_id: deliveryId,
            ndc: assessment.ndc,
            band: assessment.band,
            add_back_s: assessment.add_back_s,
            justification: assessment.justification,
            assessed_by: toJson(assessment.assessed_by),
            created_at: assessment.created_at,
            withdrawn_by: null,
            withdrawn_at: null,
            signature: toJson(signature),
            withdrawal_signature: null,
          })
          .execute()
        const next = await rewritePlan(trx, deliveryId)
        await record?.(trx, assessment)
        return { assessment, next }
      }),
    )
    await this.rejudge(delivery, next)
    return assessment
  }

  /** `signer` was authenticated by the route with the meaning `assessed`: a withdrawal is signed too. */
  async withdraw(principal: Principal, deliveryId: string, assessmentId: string, signer: Signer): Promise<Assessment> {
    const { db, clock } = this.deps
    const delivery = await this.latestLeg(principal, deliveryId)
    const row = await db
      .selectFrom('stability_assessments')
      .selectAll()
      .where('id', '=', assessmentId)
      .where('delivery_id', '=', deliveryId)
      .executeTakeFirst()
    if (!row) throw notFound('assessment')
    // Withdrawing twice answers the first withdrawal: DELETE is idempotent.
    if (row.withdrawn_at !== null) return shown(row, await readCustody(db, deliveryId))
    const withdrawnAt = iso(clock.now())
    const { updated, next } = await retryOnChainRace(() =>
      db.transaction().execute(async (trx) => {
        const withdrawal = { withdrawn_by: toJson({ client_id: principal.clientId, sub: principal.sub }), withdrawn_at: withdrawnAt }
        const signature = await appendSignedAssessment(
          trx,
          recordOf(shown(row, []), 'withdraw', withdrawnAt),
          signer,
          principal,
          withdrawnAt,
        )
        const changes = { ...withdrawal, withdrawal_signature: toJson(signature) }
        const done = await trx
          .updateTable('stability_assessments')
          .set(changes)
          .where('id', '=', assessmentId)
          .where('withdrawn_at', 'is', null)
          .executeTakeFirst()
        // Withdrawn meanwhile by another request: its withdrawal stands, and this one adds nothing to the chain.
        if (Number(done.numUpdatedRows) === 0) throw new AppError('conflict', 'This assessment was withdrawn meanwhile; read it again.')
        return { updated: { ...row, ...changes }, next: await rewritePlan(trx, deliveryId) }
      }),
    )
    await this.rejudge(delivery, next)
    return shown(updated, await readCustody(db, deliveryId))
  }

  /** 404 for a delivery the caller may not see, 409 for an earlier leg: checked before any password is tried. */
  async check(principal: Principal, deliveryId: string): Promise<void> {
    await this.latestLeg(principal, deliveryId)
  }

  /** Assessments change the budget still to spend: only the prescription's latest leg takes them. */
  private async latestLeg(principal: Principal, deliveryId: string): Promise<Database['deliveries']> {
    const { db } = this.deps
    const delivery = visibleDelivery(
      principal,
      await db.selectFrom('deliveries').selectAll().where('id', '=', deliveryId).executeTakeFirst(),
    )
    const later = await db
      .selectFrom('deliveries')
      .select('id')
      .where('rx_id', '=', delivery.rx_id)
      .where('leg', '>', delivery.leg)
      .executeTakeFirst()
    if (later)
      throw new AppError('conflict', `This leg was redelivered as ${later.id}: assess the latest leg, which carries this one's ledger.`, {
        latest_leg: later.id,
      })
    return delivery
  }

  /**
   * The ledger recomputed from the stored readings with the assessments in force, shown at once; the
   * rule engine is told, so its next readings are judged with them. What was announced stays announced.
   */
  private async rejudge(delivery: Database['deliveries'], plan: StabilityPlan): Promise<void> {
    const { db } = this.deps
    const ledger = (await legLedger(this.sink, delivery, plan)) ?? startLedger(plan, null)
    const row = await db.selectFrom('deliveries').select('cold_chain').where('id', '=', delivery.id).executeTakeFirstOrThrow()
    const stored = fromJson<StoredColdChain>(row.cold_chain)
    await db
      .updateTable('deliveries')
      .set({ cold_chain: toJson({ ...stored, stability: summarizeStability(ledger) }) })
      .where('id', '=', delivery.id)
      .execute()
    this.planChanged(delivery, plan)
  }
}

async function planOf(db: Executor, deliveryId: string): Promise<StabilityPlan | null> {
  const row = await db.selectFrom('delivery_stability').select('plan').where('delivery_id', '=', deliveryId).executeTakeFirst()
  return row ? (JSON.parse(row.plan) as StabilityPlan) : null
}

/** The plan's add_backs become the assessments in force, oldest first (read in the same transaction as the change). */
async function rewritePlan(trx: Executor, deliveryId: string): Promise<StabilityPlan> {
  const plan = (await planOf(trx, deliveryId))!
  const rows = await trx
    .selectFrom('stability_assessments')
    .select(['id', 'ndc', 'band', 'add_back_s', 'justification', 'signature'])
    .where('delivery_id', '=', deliveryId)
    .where('withdrawn_at', 'is', null)
    .orderBy('id')
    .execute()
  const addBacks: AddBack[] = rows.map((r) => ({
    id: r.id,
    ndc: r.ndc,
    band: r.band,
    add_back_s: r.add_back_s,
    justification: r.justification,
    signed_by: signedBy(r.signature),
  }))
  const next = { ...plan, add_backs: addBacks }
  await trx
    .updateTable('delivery_stability')
    .set({ plan: toJson(next) })
    .where('delivery_id', '=', deliveryId)
    .execute()
  return next
}

/** What the ledger shows of an assessment's signature (name, time, meaning); null on rows made before signing. */
function signedBy(json: string | null): AddBack['signed_by'] {
  if (json === null) return null
  const { name, signed_at, meaning } = JSON.parse(json) as StoredSignature
  return { name, signed_at, meaning }
}

/** Tries `attempt` again when another append to the same custody chain took the seq it meant to use. */
async function retryOnChainRace<T>(attempt: () => Promise<T>): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt()
    } catch (error) {
      if (!isUniqueViolation(error) || n >= MAX_ATTEMPTS) throw error
    }
  }
}

/** What an assessment's signature (or its withdrawal's) signs. */
function recordOf(
  a: Omit<Assessment, 'signature' | 'withdrawal_signature' | 'signature_verified'>,
  action: 'assess' | 'withdraw',
  withdrawnAt: string | null = null,
): AssessmentRecord {
  const { id, delivery_id, ndc, band, add_back_s, justification, created_at } = a
  return { action, id, delivery_id, ndc, band, add_back_s, justification, created_at, withdrawn_at: withdrawnAt }
}

/** The row as the API answers it; the signatures are checked against the delivery's custody chain. */
function shown(row: Database['stability_assessments'], chain: readonly CustodyEvent[]): Assessment {
  const signature = row.signature === null ? null : (JSON.parse(row.signature) as StoredSignature)
  const base = {
    id: row.id,
    delivery_id: row.delivery_id,
    ndc: row.ndc,
    band: row.band,
    add_back_s: row.add_back_s,
    justification: row.justification,
    assessed_by: JSON.parse(row.assessed_by) as Assessment['assessed_by'],
    created_at: row.created_at,
    withdrawn_by: row.withdrawn_by === null ? null : (JSON.parse(row.withdrawn_by) as Assessment['assessed_by']),
    withdrawn_at: row.withdrawn_at,
  }
  return {
    ...base,
    signature,
    withdrawal_signature: row.withdrawal_signature === null ? null : (JSON.parse(row.withdrawal_signature) as StoredSignature),
    signature_verified: assessmentSignatureVerified(chain, recordOf(base, 'assess'), signature),
  }
}
