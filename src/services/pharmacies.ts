import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import { fromJson, toJson, type Database } from '../store/schema.js'
import type { RecordAnswer } from '../store/record-answer.js'
import type { ServiceDeps } from './context.js'
import { paginate, type Page, type PageRequest } from '../store/pagination.js'
import { visibleOr404 } from '../auth/tenancy.js'
import { AppError, notFound } from '../errors.js'
import type { CalibrationPolicy } from '../domain/sensor-calibration.js'
import { DEFAULT_ESCALATE_AFTER_S } from '../alarms/alarm-records.js'
import { DEFAULT_MAX_ATTEMPTS } from '../domain/delivery-machine.js'
import { newWebhookSecret } from '../webhooks/signing.js'
import { refuseNonPublicTarget } from '../webhooks/ssrf.js'
import { sealingContext } from '../store/sealed-secrets.js'
import { normalizeRequirements, type PodRequirements } from '../domain/proof-of-delivery.js'

/** The outcomes written back to a pharmacy: a delivery that ended with the goods somewhere. */
const WRITEBACK_EVENTS = ['delivery.delivered', 'delivery.returned']

type Address = { line1: string; line2?: string | undefined; city: string; region: string; postal_code: string; country: string }
export type NewPharmacy = {
  name: string
  ncpdp_id?: string | undefined
  npi?: string | undefined
  address: Address
  timezone: string
  location?: { lat: number; lng: number } | undefined
  writeback?: { url: string; format?: WritebackFormat | undefined } | undefined
  release_policy?: ReleasePolicy | undefined
  calibration_policy?: CalibrationPolicy | undefined
  escalate_after_s?: number | undefined
  /** GS1 Global Location Number: names the pharmacy in its EPCIS events (docs/interop.md). */
  gln?: string | undefined
  /** Attempts a delivery may make, the first included (docs/api.md, Attempts). */
  max_attempts?: number | undefined
  /** Proofs every delivery needs (docs/api.md, Proof of delivery). */
  pod_requirements?: PodRequirements | undefined
  /** E.164; the patients' tracking page shows it (docs/api.md, Tracking links). */
  phone?: string | undefined
  /** Whether the service raises `patient.notify` events for this pharmacy (docs/api.md, Patient notifications). */
  patient_notify?: boolean | undefined
}
/** docs/interop.md: outcomes as rxtrace event envelopes (default) or as FHIR R4 transaction Bundles. */
export const writebackFormats = ['rxtrace', 'fhir-r4'] as const
export type WritebackFormat = (typeof writebackFormats)[number]
/** PATCH /v1/pharmacies/{id}: the pharmacy's policies. */
export type PharmacyChanges = Partial<
  Pick<
    Pharmacy,
    'release_policy' | 'calibration_policy' | 'escalate_after_s' | 'gln' | 'max_attempts' | 'pod_requirements' | 'phone' | 'patient_notify'
  >
>
/** docs/stability.md, Release: who releases an excursion the products' stability budgets survive. */
export const releasePolicies = ['manual', 'auto_within_budget'] as const
export type ReleasePolicy = (typeof releasePolicies)[number]
export type Pharmacy = Omit<
  NewPharmacy,
  | 'ncpdp_id'
  | 'npi'
  | 'location'
  | 'writeback'
  | 'release_policy'
  | 'calibration_policy'
  | 'escalate_after_s'
  | 'gln'
  | 'max_attempts'
  | 'pod_requirements'
  | 'phone'
  | 'patient_notify'
> & {
  max_attempts: number
  gln: string | null
  pod_requirements: PodRequirements | null
  phone: string | null
  patient_notify: boolean
  release_policy: ReleasePolicy
  calibration_policy: CalibrationPolicy
  escalate_after_s: number
  id: string
  created_at: string
  ncpdp_id: string | null
  npi: string | null
  location: { lat: number; lng: number } | null
  writeback: { url: string; format: WritebackFormat; secret?: string } | null
}

export class PharmacyService {
  /** `allowPrivate`: `WEBHOOK_ALLOW_PRIVATE`, which governs writeback URLs as it does webhook URLs. */
  constructor(
    private readonly deps: ServiceDeps,
    private readonly allowPrivate: boolean,
  ) {}

  /** The writeback secret is shown once: `record` keeps the answer without it. */
  async create(principal: Principal, input: NewPharmacy, record?: RecordAnswer<Pharmacy>): Promise<Pharmacy> {
    if (principal.pharmacyId || principal.fleetId) {
      throw new AppError('insufficient_scope', 'Only an unrestricted client registers pharmacies.')
    }
    // Refused now, as a webhook URL is, rather than by the first writeback days later.
    if (input.writeback) await refuseNonPublicTarget(input.writeback.url, '/writeback/url', { allowPrivate: this.allowPrivate })
    const row = {
      id: newId('ph'),
      name: input.name,
      ncpdp_id: input.ncpdp_id ?? null,
      npi: input.npi ?? null,
      address: toJson(input.address),
      timezone: input.timezone,
      location: input.location ? toJson(input.location) : null,
      writeback: input.writeback ? toJson({ url: input.writeback.url, format: input.writeback.format ?? 'rxtrace' }) : null,
      created_at: iso(this.deps.clock.now()),
      // New pharmacies release by budget unless they ask otherwise; those from before keep manual (migration 0032).
      release_policy: input.release_policy ?? 'auto_within_budget',
      calibration_policy: input.calibration_policy ?? 'refuse',
      escalate_after_s: input.escalate_after_s ?? DEFAULT_ESCALATE_AFTER_S,
      gln: input.gln ?? null,
      max_attempts: input.max_attempts ?? DEFAULT_MAX_ATTEMPTS,
      pod_requirements: requirementsJson(input.pod_requirements),
      phone: input.phone ?? null,
      patient_notify: input.patient_notify ? 1 : 0,
    }
    if (!input.writeback) {
      const pharmacy = toPharmacy(row)
      await this.deps.db.transaction().execute(async (trx) => {
        await trx.insertInto('pharmacies').values(row).execute()
        await record?.(trx, pharmacy)
      })
      return pharmacy
    }
    // Writeback (README, Webhooks): outcomes are signed like webhooks, with a secret of the pharmacy's own.
    const secret = newWebhookSecret()
    const format = input.writeback.format ?? 'rxtrace'
    const pharmacy = { ...toPharmacy(row), writeback: { url: input.writeback.url, format, secret } }
    const endpointId = newId('wh')
    await this.deps.db.transaction().execute(async (trx) => {
      await trx.insertInto('pharmacies').values(row).execute()
      await trx
        .insertInto('webhook_endpoints')
        .values({
          id: endpointId,
          kind: 'writeback',
          url: input.writeback!.url,
          events: JSON.stringify(WRITEBACK_EVENTS),
          description: 'writeback',
          enabled: 1,
          disabled_reason: null,
          pharmacy_id: row.id,
          fleet_id: null,
          secret: this.deps.secrets.seal(sealingContext('webhook_endpoints', endpointId), secret),
          previous_secret: null,
          previous_secret_expires_at: null,
          failing_since: null,
          created_at: row.created_at,
          updated_at: row.created_at,
          signature_scheme: 'v1',
          body_format: format,
        })
        .execute()
      await record?.(trx, pharmacy)
    })
    return pharmacy
  }

  async get(principal: Principal, id: string): Promise<Pharmacy> {
    const row = await this.deps.db.selectFrom('pharmacies').selectAll().where('id', '=', id).executeTakeFirst()
    return toPharmacy(visibleOr404(principal, row && { ...row, pharmacy_id: row.id }, 'pharmacy'))
  }

  /** The pharmacy's policies (docs/api.md, Pharmacies); its own restricted client or an unrestricted one. */
  async update(principal: Principal, id: string, changes: PharmacyChanges): Promise<Pharmacy> {
    if (principal.fleetId) throw notFound('pharmacy')
    await this.get(principal, id)
    return this.deps.db.transaction().execute(async (trx) => {
      const { pod_requirements, patient_notify, ...columns } = changes
      await trx
        .updateTable('pharmacies')
        .set({
          ...columns,
          ...(pod_requirements !== undefined ? { pod_requirements: requirementsJson(pod_requirements) } : {}),
          ...(patient_notify === undefined ? {} : { patient_notify: patient_notify ? 1 : 0 }),
        })
        .where('id', '=', id)
        .execute()
      const row = await trx.selectFrom('pharmacies').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
      return toPharmacy(row)
    })
  }

  async list(principal: Principal, page: PageRequest): Promise<Page<Pharmacy>> {
    let query = this.deps.db.selectFrom('pharmacies').selectAll()
    if (principal.pharmacyId) query = query.where('id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('id', '=', '') // fleets see no pharmacy records
    const result = await paginate(query, 'id', page)
    return { data: result.data.map(toPharmacy), next_cursor: result.next_cursor }
  }
}

type PharmacyRow = Omit<
  Database['pharmacies'],
  'release_policy' | 'calibration_policy' | 'escalate_after_s' | 'max_attempts' | 'patient_notify'
> & {
  max_attempts: number
  release_policy: string
  calibration_policy: string
  escalate_after_s: number
  patient_notify: number
}

function toPharmacy(row: PharmacyRow): Pharmacy {
  return {
    id: row.id,
    name: row.name,
    ncpdp_id: row.ncpdp_id,
    npi: row.npi,
    address: fromJson(row.address),
    timezone: row.timezone,
    location: fromJson(row.location),
    writeback: writebackOf(row.writeback),
    created_at: row.created_at,
    release_policy: row.release_policy as ReleasePolicy,
    calibration_policy: row.calibration_policy as CalibrationPolicy,
    escalate_after_s: row.escalate_after_s,
    gln: row.gln ?? null,
    max_attempts: row.max_attempts,
    pod_requirements: fromJson<PodRequirements | null>(row.pod_requirements ?? null),
    phone: row.phone ?? null,
    patient_notify: row.patient_notify === 1,
  }
}

/** Stored in their canonical form; null when nothing is required. */
export function requirementsJson(requirements: PodRequirements | null | undefined): string | null {
  const normal = normalizeRequirements(requirements)
  return normal ? toJson(normal) : null
}

/** Writebacks registered before formats existed are `rxtrace`. */
function writebackOf(stored: string | null): Pharmacy['writeback'] {
  const writeback = fromJson<{ url: string; format?: WritebackFormat } | null>(stored)
  return writeback && { url: writeback.url, format: writeback.format ?? 'rxtrace' }
}
