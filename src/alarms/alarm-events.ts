import type { NewEvent } from '../events/outbox.js'
import { toAlarm, type AlarmRow } from './alarm-records.js'

/** `alarm.acknowledged` or `alarm.escalated` for the alarm as it stands (src/api/event-data.ts, AlarmData). */
export function alarmEvent(type: 'alarm.acknowledged' | 'alarm.escalated', row: AlarmRow): NewEvent {
  const alarm = toAlarm(row)
  return {
    type,
    pharmacy_id: row.pharmacy_id,
    fleet_id: row.fleet_id,
    delivery_id: row.delivery_id,
    rx_id: row.rx_id,
    data: {
      alarm_id: alarm.id,
      kind: alarm.kind,
      state: alarm.state,
      raised_at: alarm.raised_at,
      cleared_at: alarm.cleared_at,
      acknowledged_by: alarm.acknowledged_by,
      acknowledged_at: alarm.acknowledged_at,
      note: alarm.note,
      assigned_to: alarm.assigned_to,
      escalate_at: alarm.escalate_at,
    },
    // Once per alarm, whichever copy or restart writes it (the outbox keeps one per delivery and key).
    dedupe_key: `${type}:${row.id}`,
  }
}
