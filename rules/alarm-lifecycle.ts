// The lifecycle of an alarm (rules/README.md, Alarms), after ANSI/ISA-18.2's alarm states: an
// alarm is active or cleared, and acknowledged or not, independently. Pure: the service stores
// the alarm and the time and person come in with each event.

export const alarmStates = ['ACTIVE_UNACK', 'ACTIVE_ACK', 'CLEARED_UNACK', 'CLEARED_ACK'] as const
export type AlarmState = (typeof alarmStates)[number]

export const alarmKinds = ['excursion', 'break', 'sensor_gap', 'stability'] as const
export type AlarmKind = (typeof alarmKinds)[number]

/** What the lifecycle decides about; the stored alarm has more (ids, delivery, escalation). */
export type AlarmLifecycle = {
  state: AlarmState
  cleared_at: string | null
  acknowledged_by: string | null
  acknowledged_at: string | null
  note: string | null
  assigned_to: string | null
}

export type AlarmEvent =
  | { type: 'acknowledge'; by: string; at: string; note: string }
  /** The rules saw it end (an excursion recovered), or a disposition decided the delivery. */
  | { type: 'clear'; at: string }
  | { type: 'assign'; to: string }

export type AlarmRefusal = 'already_acknowledged' | 'already_cleared' | 'closed'
export type AlarmOutcome = { ok: true; alarm: AlarmLifecycle } | { ok: false; reason: AlarmRefusal }

/** A new alarm: active, nobody has seen it. */
export function raisedAlarm(): AlarmLifecycle {
  return { state: 'ACTIVE_UNACK', cleared_at: null, acknowledged_by: null, acknowledged_at: null, note: null, assigned_to: null }
}

export const isAcknowledged = (state: AlarmState) => state === 'ACTIVE_ACK' || state === 'CLEARED_ACK'
const isActive = (state: AlarmState) => state === 'ACTIVE_UNACK' || state === 'ACTIVE_ACK'

/**
 * The alarm after `event`, or why it cannot happen. CLEARED_ACK is final: nothing moves it and
 * nothing changes it (a closed record). Acknowledging is once; clearing is once.
 */
export function applyAlarmEvent(alarm: AlarmLifecycle, event: AlarmEvent): AlarmOutcome {
  if (alarm.state === 'CLEARED_ACK') return { ok: false, reason: 'closed' }
  switch (event.type) {
    case 'acknowledge':
      if (isAcknowledged(alarm.state)) return { ok: false, reason: 'already_acknowledged' }
      return {
        ok: true,
        alarm: {
          ...alarm,
          state: isActive(alarm.state) ? 'ACTIVE_ACK' : 'CLEARED_ACK',
          acknowledged_by: event.by,
          acknowledged_at: event.at,
          note: event.note,
        },
      }
    case 'clear':
      if (!isActive(alarm.state)) return { ok: false, reason: 'already_cleared' }
      return { ok: true, alarm: { ...alarm, state: alarm.state === 'ACTIVE_ACK' ? 'CLEARED_ACK' : 'CLEARED_UNACK', cleared_at: event.at } }
    case 'assign':
      return { ok: true, alarm: { ...alarm, assigned_to: event.to } }
  }
}

/**
 * Whether an alarm is due for `alarm.escalated` at `nowMs`: nobody has acknowledged it (active or
 * cleared unseen) by its `escalate_at`, and it was not escalated before.
 */
export function escalationDue(
  alarm: Pick<AlarmLifecycle, 'state'> & { escalate_at: string; escalated_at: string | null },
  nowMs: number,
): boolean {
  return !isAcknowledged(alarm.state) && alarm.escalated_at === null && Date.parse(alarm.escalate_at) <= nowMs
}
