import { applyAlarmEvent, raisedAlarm, type AlarmEvent, type AlarmKind, type AlarmLifecycle, type AlarmState } from '../../rules/index.js'
import type { NewEvent } from '../events/outbox.js'
import { newId } from '../ids.js'
import type { AlarmTables } from '../store/alarm-tables.js'
import type { Executor } from '../store/schema.js'

export type AlarmRow = AlarmTables['alarms']

/** Fifteen minutes: how long an alarm may wait for a person before it is escalated, unless the pharmacy says otherwise. */
export const DEFAULT_ESCALATE_AFTER_S = 900

/** An alarm as the API shows it (docs/api.md, Alarms). */
export type Alarm = AlarmLifecycle & {
  id: string
  delivery_id: string
  pharmacy_id: string
  fleet_id: string | null
  kind: AlarmKind
  raised_at: string
  escalate_at: string
  escalated_at: string | null
}

export function toAlarm(row: AlarmRow): Alarm {
  return {
    id: row.id,
    delivery_id: row.delivery_id,
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    kind: row.kind as AlarmKind,
    state: row.state as AlarmState,
    raised_at: row.raised_at,
    cleared_at: row.cleared_at,
    acknowledged_by: row.acknowledged_by,
    acknowledged_at: row.acknowledged_at,
    note: row.note,
    assigned_to: row.assigned_to,
    escalate_at: row.escalate_at,
    escalated_at: row.escalated_at,
  }
}

/** The kind of alarm a break raises: its reason names sensor gaps and stability budgets apart. */
const breakKind = (reason: unknown): AlarmKind =>
  reason === 'sensor_gap' ? 'sensor_gap' : reason === 'stability_exhausted' ? 'stability' : 'break'

/**
 * What a rule event does to alarms: an excursion raises one (keyed by its start), its recovery
 * clears that one, a break raises one (a break never clears by itself: a disposition clears it).
 */
function alarmChange(event: NewEvent): { raise: { kind: AlarmKind; key: string } } | { clear: string } | null {
  if (!event.delivery_id || !event.dedupe_key) return null
  switch (event.type) {
    case 'temperature.excursion':
      return { raise: { kind: 'excursion', key: event.dedupe_key } }
    case 'temperature.recovered':
      // rules/events.ts eventKey: `recovered:<start>` ends the excursion `excursion:<start>`.
      return { clear: event.dedupe_key.replace(/^recovered:/, 'excursion:') }
    case 'cold-chain.break':
      return { raise: { kind: breakKind(event.data.reason), key: event.dedupe_key } }
    default:
      return null
  }
}

/**
 * Raises and clears the alarms of the rule events, in the transaction that commits the events
 * (src/telemetry/cold-chain/sql-store.ts): an alarm exists exactly when its event does. A
 * replayed event finds its alarm there already (the delivery and key are unique) and does nothing.
 */
export async function recordRuleAlarms(trx: Executor, events: readonly NewEvent[], nowIso: string): Promise<void> {
  const escalateAfter = new Map<string, number>()
  for (const event of events) {
    const change = alarmChange(event)
    if (!change) continue
    const deliveryId = event.delivery_id!
    if ('clear' in change) {
      const at = typeof event.data.recovered_at === 'string' ? event.data.recovered_at : nowIso
      await transition(trx, { delivery_id: deliveryId, source_key: change.clear }, { type: 'clear', at })
      continue
    }
    const pharmacyId = event.pharmacy_id!
    if (!escalateAfter.has(pharmacyId)) escalateAfter.set(pharmacyId, await escalateAfterOf(trx, pharmacyId))
    const raisedAt = typeof event.data.at === 'string' ? event.data.at : nowIso
    await trx
      .insertInto('alarms')
      .values({
        id: newId('al'),
        delivery_id: deliveryId,
        pharmacy_id: pharmacyId,
        fleet_id: event.fleet_id ?? null,
        rx_id: event.rx_id ?? null,
        kind: change.raise.kind,
        source_key: change.raise.key,
        ...raisedAlarm(),
        raised_at: raisedAt,
        // Counted from when it is recorded, not from the reading's time: a late reading's alarm still gets its full time.
        escalate_at: new Date(Date.parse(nowIso) + escalateAfter.get(pharmacyId)! * 1000).toISOString(),
        escalated_at: null,
        version: 1,
      })
      .onConflict((oc) => oc.columns(['delivery_id', 'source_key']).doNothing())
      .execute()
  }
}

/** A disposition decides the delivery: its alarms still active are cleared by it, in its transaction. */
export async function clearAlarmsOfDelivery(trx: Executor, deliveryId: string, atIso: string): Promise<void> {
  const active = await trx
    .selectFrom('alarms')
    .select('source_key')
    .where('delivery_id', '=', deliveryId)
    .where('state', 'in', ['ACTIVE_UNACK', 'ACTIVE_ACK'])
    .execute()
  for (const { source_key } of active) await transition(trx, { delivery_id: deliveryId, source_key }, { type: 'clear', at: atIso })
}

/**
 * Applies `event` to the alarm (rules/alarm-lifecycle.ts) with a version check, so two copies
 * acknowledging or clearing at once leave one winner. Answers the outcome and the alarm after it.
 */
export async function transition(
  trx: Executor,
  which: { id: string } | { delivery_id: string; source_key: string },
  event: AlarmEvent,
): Promise<{ ok: true; alarm: AlarmRow } | { ok: false; reason: string; alarm: AlarmRow | undefined }> {
  let query = trx.selectFrom('alarms').selectAll()
  query =
    'id' in which
      ? query.where('id', '=', which.id)
      : query.where('delivery_id', '=', which.delivery_id).where('source_key', '=', which.source_key)
  const row = await query.executeTakeFirst()
  if (!row) return { ok: false, reason: 'not_found', alarm: undefined }
  const outcome = applyAlarmEvent(toAlarm(row), event)
  if (!outcome.ok) return { ok: false, reason: outcome.reason, alarm: row }
  const { state, cleared_at, acknowledged_by, acknowledged_at, note, assigned_to } = outcome.alarm
  const changes = { state, cleared_at, acknowledged_by, acknowledged_at, note, assigned_to, version: row.version + 1 }
  const updated = await trx
    .updateTable('alarms')
    .set(changes)
    .where('id', '=', row.id)
    .where('version', '=', row.version)
    .executeTakeFirst()
  if (Number(updated.numUpdatedRows) === 0) return { ok: false, reason: 'changed', alarm: row }
  return { ok: true, alarm: { ...row, ...changes } }
}

async function escalateAfterOf(trx: Executor, pharmacyId: string): Promise<number> {
  const row = await trx.selectFrom('pharmacies').select('escalate_after_s').where('id', '=', pharmacyId).executeTakeFirst()
  return row?.escalate_after_s ?? DEFAULT_ESCALATE_AFTER_S
}
