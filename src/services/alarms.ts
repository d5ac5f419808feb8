import type { Principal } from '../auth/scopes.js'
import { iso } from '../clock.js'
import { AppError, notFound, validationFailed } from '../errors.js'
import { alarmEvent } from '../alarms/alarm-events.js'
import { toAlarm, transition, type Alarm } from '../alarms/alarm-records.js'
import type { AlarmEvent, AlarmState } from '../../rules/index.js'
import { decodeCursor, encodeCursor, type Page, type PageRequest } from '../store/pagination.js'
import type { ServiceDeps } from './context.js'

export type AlarmFilter = { state?: AlarmState | undefined; delivery_id?: string | undefined }

/**
 * Alarms of excursions and breaks (docs/api.md, Alarms): listed, acknowledged with a note and
 * assigned. Who sees an alarm is who sees its delivery: its pharmacy, the fleet it is dispatched
 * to, and a driver user only the deliveries assigned to them.
 */
export class AlarmService {
  constructor(private readonly deps: ServiceDeps) {}

  async list(principal: Principal, filter: AlarmFilter, page: PageRequest): Promise<Page<Alarm>> {
    let query = this.visible(principal).selectAll('alarms')
    if (filter.state) query = query.where('alarms.state', '=', filter.state)
    if (filter.delivery_id) query = query.where('alarms.delivery_id', '=', filter.delivery_id)
    if (page.cursor) query = query.where('alarms.id', '>', decodeCursor(page.cursor))
    const rows = await query
      .orderBy('alarms.id')
      .limit(page.limit + 1)
      .execute()
    const data = rows.slice(0, page.limit)
    return { data: data.map(toAlarm), next_cursor: rows.length > page.limit ? encodeCursor(data.at(-1)!.id) : null }
  }

  async get(principal: Principal, id: string): Promise<Alarm> {
    const row = await this.visible(principal).selectAll('alarms').where('alarms.id', '=', id).executeTakeFirst()
    if (!row) throw notFound('alarm')
    return toAlarm(row)
  }

  /** ACTIVE_UNACK → ACTIVE_ACK, CLEARED_UNACK → CLEARED_ACK; emits `alarm.acknowledged`. */
  async acknowledge(principal: Principal, id: string, note: string): Promise<Alarm> {
    return this.apply(principal, id, { type: 'acknowledge', by: principal.sub, at: iso(this.deps.clock.now()), note }, true)
  }

  /** Names who looks after the alarm: a person of its pharmacy or of the fleet its delivery is dispatched to. */
  async assign(principal: Principal, id: string, userId: string): Promise<Alarm> {
    const alarm = await this.get(principal, id)
    const db = this.deps.db
    const user = await db.selectFrom('users').select(['pharmacy_id', 'fleet_id', 'disabled']).where('id', '=', userId).executeTakeFirst()
    const delivery = await db.selectFrom('deliveries').select('fleet_id').where('id', '=', alarm.delivery_id).executeTakeFirstOrThrow()
    const ofThisDelivery =
      user && !user.disabled && (user.pharmacy_id === alarm.pharmacy_id || (user.fleet_id !== null && user.fleet_id === delivery.fleet_id))
    if (!ofThisDelivery) throw validationFailed([{ pointer: '/user', message: `no user ${userId} of this delivery's pharmacy or fleet` }])
    return this.apply(principal, id, { type: 'assign', to: userId }, false)
  }

  private async apply(principal: Principal, id: string, event: AlarmEvent, announce: boolean): Promise<Alarm> {
    await this.get(principal, id) // the tenant walls
    const outcome = await this.deps.db.transaction().execute(async (trx) => {
      const done = await transition(trx, { id }, event)
      if (!done.ok) return { done, messages: 0 }
      const messages = announce ? (await this.deps.outbox.append(trx, [alarmEvent('alarm.acknowledged', done.alarm)])).messages : 0
      return { done, messages }
    })
    if (!outcome.done.ok) throw refused(outcome.done.reason)
    this.deps.outbox.committed(outcome.messages)
    return toAlarm(outcome.done.alarm)
  }

  /** Alarms joined to their deliveries, as far as the caller may see those (src/services/delivery-visibility.ts). */
  private visible(principal: Principal) {
    let query = this.deps.db.selectFrom('alarms').innerJoin('deliveries', 'deliveries.id', 'alarms.delivery_id')
    if (principal.pharmacyId) query = query.where('deliveries.pharmacy_id', '=', principal.pharmacyId)
    if (principal.fleetId) query = query.where('deliveries.fleet_id', '=', principal.fleetId)
    if (principal.driverId) query = query.where('deliveries.driver_id', '=', principal.driverId)
    return query
  }
}

function refused(reason: string): AppError {
  switch (reason) {
    case 'already_acknowledged':
      return new AppError('invalid_transition', 'The alarm is already acknowledged.', { reason })
    case 'closed':
      return new AppError('invalid_transition', 'The alarm is cleared and acknowledged: it is closed.', { reason })
    default:
      return new AppError('conflict', 'The alarm changed while this was applied; retry.')
  }
}
