import { resolveProfile, ProfileError, type CustomProfileInput, type TemperatureProfile } from '../../rules/profile.js'
import { startLedger, summarizeStability } from '../../rules/index.js'
import { stabilityPlanFor } from './products.js'
import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { auditHashOf, chainEvent } from '../domain/custody.js'
import { notFound, validationFailed } from '../errors.js'
import { newId } from '../ids.js'
import { fromJson, toJson, type Database, type Executor } from '../store/schema.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { initialColdChain } from '../domain/cold-chain.js'
import { custodyRow } from '../store/custody-rows.js'
import { beforeAnyReading } from '../domain/handoff-temperature.js'
import { insertRow, precompiled } from '../store/precompiled.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { visibleOr404 } from '../auth/tenancy.js'
import { normalizeRequirements, type PodRequirements } from '../domain/proof-of-delivery.js'
import { requirementsJson } from './pharmacies.js'

// Without deliver_by, the ETA promises same-day delivery within this many hours of queueing.
const DEFAULT_ETA_HOURS = 4

/** An item of a prescription; `gtin` and `serials` name it in EPCIS events (docs/interop.md). */
export type PrescriptionItem = {
  description: string
  ndc?: string | undefined
  quantity: number
  gtin?: string | undefined
  serials?: string[] | undefined
}

export type NewPrescription = {
  patient_id: string
  cold_chain: boolean
  pharmacy_id?: string | undefined
  temperature_profile?: string | CustomProfileInput | undefined
  deliver_by?: string | undefined
  delivery_address?: Record<string, unknown> | undefined
  items?: PrescriptionItem[] | undefined
  external_ref?: string | undefined
  metadata?: Record<string, string> | undefined
  /** Proofs this prescription adds to its pharmacy's (docs/api.md, Proof of delivery). */
  pod_requirements?: PodRequirements | undefined
}

export type Prescription = {
  rx_id: string
  status: string
  eta: string
  audit_hash: string
  delivery_id: string
  pharmacy_id: string
  patient_id: string
  cold_chain: boolean
  temperature_profile: TemperatureProfile | null
  deliver_by: string | null
  delivery_address: Record<string, unknown> | null
  items: NewPrescription['items']
  external_ref: string | null
  metadata: Record<string, string>
  created_at: string
  pod_requirements: PodRequirements | null
}

// Pharmacies are never deleted, so one that was seen exists for good; bounded all the same.
const KNOWN_PHARMACIES_LIMIT = 10_000

export class PrescriptionService {
  private readonly knownPharmacies = new Set<string>()

  constructor(private readonly deps: ServiceDeps) {}

  /** Queues a delivery: prescription, delivery, custody event 1 and `delivery.created` commit together. */
  async create(principal: Principal, input: NewPrescription, record?: RecordAnswer<Prescription>): Promise<Prescription> {
    const pharmacyId = this.pharmacyFor(principal, input.pharmacy_id)
    const profile = resolveRequestedProfile(input)
    const now = this.deps.clock.now()
    const createdAt = iso(now)
    const rxId = newId('rx')
    const deliveryId = newId('dl')
    const eta = input.deliver_by ?? iso(now + DEFAULT_ETA_HOURS * 3_600_000)
    const facts = {
      rx_id: rxId,
      pharmacy_id: pharmacyId,
      patient_id: input.patient_id,
      cold_chain: input.cold_chain,
      temperature_profile: profile,
      created_at: createdAt,
    }
    const auditHash = auditHashOf(facts)
    const firstCustodyEvent = chainEvent(auditHash, {
      seq: 1,
      type: 'created',
      actor: { client_id: principal.clientId, sub: principal.sub },
      from: null,
      to: pharmacyId,
      location: null,
      evidence_hash: null,
      occurred_at: createdAt,
      recorded_at: createdAt,
      ...(input.cold_chain ? { temperature: beforeAnyReading } : {}),
    })
    const row: Database['prescriptions'] = {
      id: rxId,
      pharmacy_id: pharmacyId,
      patient_id: input.patient_id,
      cold_chain: input.cold_chain ? 1 : 0,
      temperature_profile: profile ? toJson(profile) : null,
      deliver_by: input.deliver_by ?? null,
      delivery_address: input.delivery_address ? toJson(input.delivery_address) : null,
      items: toJson(input.items ?? []),
      external_ref: input.external_ref ?? null,
      metadata: toJson(input.metadata ?? {}),
      eta,
      audit_hash: auditHash,
      delivery_id: deliveryId,
      client_id: principal.clientId,
      created_at: createdAt,
      pod_requirements: requirementsJson(input.pod_requirements),
    }
    // What a GET returns for it, built from the values rather than parsed back from the row's JSON.
    const prescription: Prescription = {
      rx_id: rxId,
      status: 'QUEUED',
      eta,
      audit_hash: auditHash,
      delivery_id: deliveryId,
      pharmacy_id: pharmacyId,
      patient_id: input.patient_id,
      cold_chain: input.cold_chain,
      temperature_profile: profile,
      deliver_by: row.deliver_by,
      delivery_address: input.delivery_address ?? null,
      items: input.items ?? [],
      external_ref: row.external_ref,
      metadata: input.metadata ?? {},
      created_at: createdAt,
      pod_requirements: normalizeRequirements(input.pod_requirements),
    }
    const messages = await this.deps.db.transaction().execute(async (trx) => {
      await this.requireExisting(trx, pharmacyId)
      // Items naming a product are judged by the stability version in force now, recorded with the delivery.
      const plan = input.cold_chain ? await stabilityPlanFor(trx, pharmacyId, input.items ?? [], createdAt, deliveryId) : null
      await insertRow(trx, 'prescriptions', row)
      await insertRow(trx, 'deliveries', {
        id: deliveryId,
        rx_id: rxId,
        pharmacy_id: pharmacyId,
        status: 'QUEUED',
        eta,
        fleet_id: null,
        driver_id: null,
        tote_id: null,
        cold_chain_required: input.cold_chain ? 1 : 0,
        profile: profile ? toJson(profile) : null,
        cold_chain: toJson(
          plan ? { ...initialColdChain(true), stability: summarizeStability(startLedger(plan, null)) } : initialColdChain(input.cold_chain),
        ),
        disposition: null,
        bound_from: null,
        bound_to: null,
        release: null,
        leg: 1,
        // `delivery.created` below is the delivery's event 1.
        version: 1,
        event_seq: 1,
        created_at: createdAt,
        updated_at: createdAt,
      })
      if (plan)
        await trx
          .insertInto('delivery_stability')
          .values({ delivery_id: deliveryId, plan: toJson(plan) })
          .execute()
      await insertRow(trx, 'custody_events', custodyRow(deliveryId, firstCustodyEvent))
      const appended = await this.deps.outbox.append(trx, [
        {
          type: 'delivery.created',
          pharmacy_id: pharmacyId,
          delivery_id: deliveryId,
          rx_id: rxId,
          seq: 1,
          data: { status: 'QUEUED', cold_chain: input.cold_chain, profile: profile?.name ?? null, eta, audit_hash: auditHash, leg: 1 },
        },
      ])
      await record?.(trx, prescription)
      return appended.messages
    })
    this.deps.outbox.committed(messages)
    // Pharmacies are never deleted: one that a committed create referenced exists for good.
    if (this.knownPharmacies.size >= KNOWN_PHARMACIES_LIMIT) this.knownPharmacies.clear()
    this.knownPharmacies.add(pharmacyId)
    return prescription
  }

  async get(principal: Principal, rxId: string): Promise<Prescription> {
    const row = await this.deps.db
      .selectFrom('prescriptions')
      .innerJoin('deliveries', 'deliveries.id', 'prescriptions.delivery_id')
      .selectAll('prescriptions')
      .select(['deliveries.status as status', 'deliveries.fleet_id as fleet_id'])
      .where('prescriptions.id', '=', rxId)
      .executeTakeFirst()
    const visible = visibleOr404(principal, row, 'prescription')
    return toPrescription(visible, visible.status)
  }

  async list(principal: Principal, page: PageRequest): Promise<Page<Prescription>> {
    let query = this.deps.db
      .selectFrom('prescriptions')
      .innerJoin('deliveries', 'deliveries.id', 'prescriptions.delivery_id')
      .selectAll('prescriptions')
      .select('deliveries.status as status')
    if (principal.pharmacyId) query = query.where('prescriptions.pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('deliveries.fleet_id', '=', principal.fleetId)
    const result = await paginate(query, 'prescriptions.id', page)
    return { data: result.data.map((r) => toPrescription(r, r.status)), next_cursor: result.next_cursor }
  }

  /** The pharmacy the prescription is for, as far as the token allows; whether it exists is checked in the create's transaction. */
  private pharmacyFor(principal: Principal, requested: string | undefined): string {
    const pharmacyId = requested ?? principal.pharmacyId
    if (!pharmacyId)
      throw validationFailed([{ pointer: '/pharmacy_id', message: 'is required when the token is not restricted to one pharmacy' }])
    if (principal.fleetId || (principal.pharmacyId && principal.pharmacyId !== pharmacyId)) throw notFound('pharmacy')
    return pharmacyId
  }

  /** Read in the transaction that references it, so the pharmacy is committed with or before it. */
  private async requireExisting(trx: Executor, pharmacyId: string): Promise<void> {
    if (this.knownPharmacies.has(pharmacyId)) return
    const [exists] = await pharmacyExists(trx, pharmacyId)
    if (!exists) throw validationFailed([{ pointer: '/pharmacy_id', message: `no pharmacy ${pharmacyId}` }])
  }
}

const pharmacyExists = precompiled((db, id: string) => db.selectFrom('pharmacies').select('id').where('id', '=', id))

function resolveRequestedProfile(input: NewPrescription): TemperatureProfile | null {
  if (!input.cold_chain) {
    if (input.temperature_profile !== undefined)
      throw validationFailed([{ pointer: '/temperature_profile', message: 'only applies when cold_chain is true' }])
    return null
  }
  try {
    return resolveProfile(input.temperature_profile ?? 'refrigerated') // docs/api.md: cold chain with no profile → refrigerated
  } catch (error) {
    if (error instanceof ProfileError) throw validationFailed([{ pointer: '/temperature_profile', message: error.message }])
    throw error
  }
}

function toPrescription(row: Database['prescriptions'], status: string): Prescription {
  return {
    rx_id: row.id,
    status,
    eta: row.eta,
    audit_hash: row.audit_hash,
    delivery_id: row.delivery_id,
    pharmacy_id: row.pharmacy_id,
    patient_id: row.patient_id,
    cold_chain: row.cold_chain === 1,
    temperature_profile: fromJson(row.temperature_profile),
    deliver_by: row.deliver_by,
    delivery_address: fromJson(row.delivery_address),
    items: fromJson(row.items),
    external_ref: row.external_ref,
    metadata: fromJson(row.metadata),
    created_at: row.created_at,
    pod_requirements: fromJson<PodRequirements | null>(row.pod_requirements ?? null),
  }
}
