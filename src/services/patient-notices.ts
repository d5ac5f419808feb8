import { iso } from '../clock.js'
import type { TrackingTokens } from '../auth/tracking-tokens.js'
import type { NewEvent } from '../events/outbox.js'
import type { Executor } from '../store/schema.js'

/** A patient's tracking link works this long after its delivery ended (docs/api.md, Tracking links). */
export const AFTER_END_MS = 24 * 3_600_000

/**
 * The messages a pharmacy's own SMS or e-mail provider sends its patients (docs/api.md,
 * Patient notifications), and the delivery event that raises each. `link_issued` is raised by
 * POST /v1/deliveries/{id}/tracking-links itself.
 */
export const patientNoticeKinds = [
  'link_issued',
  'dispatched',
  'out_for_delivery',
  'arriving',
  'delivered',
  'attempt_failed',
  'cancelled',
] as const
export type PatientNoticeKind = (typeof patientNoticeKinds)[number]

const kindOf: Record<string, PatientNoticeKind> = {
  'delivery.dispatched': 'dispatched',
  'delivery.picked-up': 'out_for_delivery',
  'delivery.arriving': 'arriving',
  'delivery.delivered': 'delivered',
  'delivery.failed': 'attempt_failed',
  'delivery.cancelled': 'cancelled',
}
// The link of an ending's notice works until the end + 24 h, not a week.
const ENDING: readonly PatientNoticeKind[] = ['delivered', 'cancelled']

/**
 * `patient.notify` events beside the delivery events that raise them, in the same transaction,
 * for pharmacies that opted in (`patient_notify`). Each carries the kind and a tracking URL
 * signed for it, and nothing else of the patient: the envelope names the pharmacy, the
 * delivery and the prescription (for the pharmacy to find whom to tell), never the fleet, so
 * no fleet endpoint or feed carries a link that shows the delivery's PIN.
 */
export class PatientNotices {
  constructor(
    private readonly tokens: TrackingTokens,
    private readonly now: () => number,
  ) {}

  /** What to append with `events`: nothing (and no read) unless one of them raises a notice. */
  alongside = async (trx: Executor, events: readonly NewEvent[]): Promise<NewEvent[]> => {
    const raising = events.filter((e) => e.delivery_id && kindOf[e.type])
    if (raising.length === 0) return []
    const pharmacyIds = [...new Set(raising.map((e) => e.pharmacy_id).filter((id): id is string => id !== null))]
    if (pharmacyIds.length === 0) return []
    const optedIn = await trx.selectFrom('pharmacies').select('id').where('id', 'in', pharmacyIds).where('patient_notify', '=', 1).execute()
    const notify = new Set(optedIn.map((p) => p.id))
    const notices: NewEvent[] = []
    for (const event of raising) {
      if (!event.pharmacy_id || !notify.has(event.pharmacy_id)) continue
      notices.push(await this.notice(kindOf[event.type]!, event.pharmacy_id, event.delivery_id!, event.rx_id ?? null))
    }
    return notices
  }

  /** One `patient.notify` event of `kind`, with `link`, or a fresh one. */
  async notice(
    kind: PatientNoticeKind,
    pharmacyId: string,
    deliveryId: string,
    rxId: string | null,
    given?: { url: string; expiresAtMs: number },
  ): Promise<NewEvent> {
    const link = given ?? (await this.tokens.issue(deliveryId, ENDING.includes(kind) ? this.now() + AFTER_END_MS : undefined))
    return {
      type: 'patient.notify',
      pharmacy_id: pharmacyId,
      fleet_id: null,
      delivery_id: deliveryId,
      rx_id: rxId,
      data: { kind, tracking_url: link.url, link_expires_at: iso(link.expiresAtMs) },
    }
  }
}
