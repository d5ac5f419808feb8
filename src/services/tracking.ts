import type { Principal } from '../auth/scopes.js'
import type { TrackingClaims, TrackingTokens } from '../auth/tracking-tokens.js'
import { iso } from '../clock.js'
import type { DeliveryStatus } from '../domain/delivery-machine.js'
import { AppError, notFound } from '../errors.js'
import type { Executor } from '../store/schema.js'
import type { ServiceDeps } from './context.js'
import { visibleDelivery } from './delivery-visibility.js'
import { AFTER_END_MS, type PatientNotices } from './patient-notices.js'

/** The PIN the patient tells the driver, when the delivery requires one (src/services/delivery-pin.ts). */
export type PinReader = (db: Executor, deliveryId: string) => Promise<string | null>

const OPEN: readonly DeliveryStatus[] = ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'FAILED']
const ENDINGS = ['delivered', 'returned', 'cancelled'] as const

/**
 * What the patient's tracking page shows (docs/api.md, Tracking links), and nothing more: no
 * patient, address, items, ids or position. `eta` and the driver only while the delivery is
 * on its way; `pin` only while open and when the delivery requires one.
 */
export type TrackingView = {
  status: DeliveryStatus
  eta: string | null
  /** The pharmacy's IANA time zone: the page shows the ETA as local time in it. */
  timezone: string
  now: string
  driver_first_name: string | null
  pin: string | null
  pharmacy: { name: string; phone: string | null }
}

/** Issues patients' tracking links and reads what their page shows. */
export class TrackingService {
  constructor(
    private readonly deps: ServiceDeps,
    private readonly tokens: TrackingTokens,
    private readonly notices: PatientNotices,
    private readonly revealPin: PinReader = async () => null,
  ) {}

  /**
   * POST /v1/deliveries/{id}/tracking-links: the delivery's pharmacy (or an unrestricted client)
   * only; a fleet never holds a link that shows the PIN. With `patient_notify`, the same URL is
   * also announced as `patient.notify` `link_issued`, for the pharmacy's provider to send.
   */
  async issue(principal: Principal, deliveryId: string): Promise<{ url: string; expires_at: string }> {
    if (principal.fleetId) throw notFound('delivery')
    const db = this.deps.db
    const delivery = visibleDelivery(
      principal,
      await db
        .selectFrom('deliveries')
        .innerJoin('pharmacies', 'pharmacies.id', 'deliveries.pharmacy_id')
        .select([
          'deliveries.id',
          'deliveries.rx_id',
          'deliveries.status',
          'deliveries.pharmacy_id',
          'deliveries.fleet_id',
          'deliveries.driver_id',
        ])
        .select('pharmacies.patient_notify')
        .where('deliveries.id', '=', deliveryId)
        .executeTakeFirst(),
    )
    const endedAt = await endedAtOf(db, delivery.id, delivery.status as DeliveryStatus)
    const closesAt = endedAt === null ? undefined : endedAt + AFTER_END_MS
    if (closesAt !== undefined && closesAt <= this.deps.clock.now())
      throw new AppError('tracking_closed', 'The delivery ended more than 24 hours ago: its tracking page is closed.', {
        ended_at: iso(endedAt!),
      })
    const link = await this.tokens.issue(delivery.id, closesAt)
    if (delivery.patient_notify === 1) {
      const event = await this.notices.notice('link_issued', delivery.pharmacy_id, delivery.id, delivery.rx_id, link)
      const { messages } = await db.transaction().execute((trx) => this.deps.outbox.append(trx, [event]))
      this.deps.outbox.committed(messages)
    }
    return { url: link.url, expires_at: iso(link.expiresAtMs) }
  }

  /** What the page of an intact, unexpired link shows; `expired` once its delivery ended 24 h ago, `invalid` if it is gone. */
  async view(claims: TrackingClaims): Promise<{ ok: true; view: TrackingView } | { ok: false; reason: 'expired' | 'invalid' }> {
    const db = this.deps.db
    const row = await db
      .selectFrom('deliveries')
      .innerJoin('pharmacies', 'pharmacies.id', 'deliveries.pharmacy_id')
      .leftJoin('drivers', 'drivers.id', 'deliveries.driver_id')
      .select([
        'deliveries.status',
        'deliveries.eta',
        'deliveries.live_eta',
        'pharmacies.name as pharmacy_name',
        'pharmacies.phone',
        'pharmacies.timezone',
      ])
      .select('drivers.name as driver_name')
      .where('deliveries.id', '=', claims.deliveryId)
      .executeTakeFirst()
    if (!row) return { ok: false, reason: 'invalid' }
    const status = row.status as DeliveryStatus
    const now = this.deps.clock.now()
    const endedAt = await endedAtOf(db, claims.deliveryId, status)
    if (endedAt !== null && endedAt + AFTER_END_MS <= now) return { ok: false, reason: 'expired' }
    const open = OPEN.includes(status)
    const onTheWay = status === 'DISPATCHED' || status === 'PICKED_UP'
    return {
      ok: true,
      view: {
        status,
        // The live ETA once the driver's positions (or the fleet's router) gave one; the promise before.
        eta: onTheWay || status === 'QUEUED' ? (row.live_eta ?? row.eta) : null,
        timezone: row.timezone,
        now: iso(now),
        driver_first_name: onTheWay && row.driver_name ? firstName(row.driver_name) : null,
        pin: open ? await this.revealPin(db, claims.deliveryId) : null,
        pharmacy: { name: row.pharmacy_name, phone: row.phone },
      },
    }
  }
}

/** A driver's first name only: the page names a person the patient will meet, no more of them. */
const firstName = (name: string) => name.trim().split(/\s+/)[0] ?? null

/** When an ended delivery (DELIVERED, RETURNED, CANCELLED) ended: its ending custody event's record time; null while open. */
async function endedAtOf(db: Executor, deliveryId: string, status: DeliveryStatus): Promise<number | null> {
  if (OPEN.includes(status)) return null
  const row = await db
    .selectFrom('custody_events')
    .select((eb) => eb.fn.max('recorded_at').as('at'))
    .where('delivery_id', '=', deliveryId)
    .where('type', 'in', [...ENDINGS])
    .executeTakeFirst()
  return row?.at ? Date.parse(String(row.at)) : null
}
