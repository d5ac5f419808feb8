// The alarm lifecycle (rules/alarm-lifecycle.ts) over random sequences of acknowledgements,
// clears and assignments: whatever happens, the alarm is in a valid state, a person's
// acknowledgement is never lost or rewritten, and a closed alarm stays closed.
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  alarmStates,
  applyAlarmEvent,
  escalationDue,
  isAcknowledged,
  raisedAlarm,
  type AlarmEvent,
  type AlarmLifecycle,
} from '../../rules/index.js'

const instant = fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }).map((ms) => new Date(ms).toISOString())
const eventArb: fc.Arbitrary<AlarmEvent> = fc.oneof(
  fc.record({ type: fc.constant('acknowledge' as const), by: fc.constantFrom('us_a', 'us_b'), at: instant, note: fc.string() }),
  fc.record({ type: fc.constant('clear' as const), at: instant }),
  fc.record({ type: fc.constant('assign' as const), to: fc.constantFrom('us_a', 'us_b') }),
)

/** Folds the events, keeping the alarm after each (refused events leave it as it was). */
function run(events: AlarmEvent[]): AlarmLifecycle[] {
  const seen = [raisedAlarm()]
  for (const event of events) {
    const outcome = applyAlarmEvent(seen.at(-1)!, event)
    seen.push(outcome.ok ? outcome.alarm : seen.at(-1)!)
  }
  return seen
}

describe('alarm lifecycle', () => {
  it('any sequence of events leaves a valid state whose acknowledgement fields are set exactly in the ACK states', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), (events) => {
        for (const alarm of run(events)) {
          expect(alarmStates).toContain(alarm.state)
          const acked = isAcknowledged(alarm.state)
          expect(alarm.acknowledged_by !== null).toBe(acked)
          expect(alarm.acknowledged_at !== null).toBe(acked)
          expect(alarm.note !== null).toBe(acked)
          expect(alarm.cleared_at !== null).toBe(alarm.state.startsWith('CLEARED'))
        }
      }),
    )
  })

  it('nothing moves or changes an alarm out of CLEARED_ACK', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), eventArb, (events, next) => {
        const closed = run(events).find((a) => a.state === 'CLEARED_ACK')
        if (!closed) return
        expect(applyAlarmEvent(closed, next)).toEqual({ ok: false, reason: 'closed' })
      }),
    )
  })

  it('the first acknowledgement is kept: who, when and the note never change afterwards', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), (events) => {
        const history = run(events)
        const first = history.find((a) => isAcknowledged(a.state))
        if (!first) return
        for (const later of history.slice(history.indexOf(first)))
          expect([later.acknowledged_by, later.acknowledged_at, later.note]).toEqual([
            first.acknowledged_by,
            first.acknowledged_at,
            first.note,
          ])
      }),
    )
  })

  it('an alarm only ever moves forward: unacknowledged to acknowledged, active to cleared', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 30 }), (events) => {
        const history = run(events)
        for (let i = 1; i < history.length; i++) {
          const [before, after] = [history[i - 1]!, history[i]!]
          if (isAcknowledged(before.state)) expect(isAcknowledged(after.state)).toBe(true)
          if (before.state.startsWith('CLEARED')) expect(after.state.startsWith('CLEARED')).toBe(true)
        }
      }),
    )
  })

  it('the named transitions: acknowledge then clear, clear unseen then acknowledge', () => {
    const acked = applyAlarmEvent(raisedAlarm(), { type: 'acknowledge', by: 'us_a', at: '2026-01-01T00:00:00Z', note: 'moved to cooler' })
    expect(acked.ok && acked.alarm.state).toBe('ACTIVE_ACK')
    const closed = acked.ok && applyAlarmEvent(acked.alarm, { type: 'clear', at: '2026-01-01T00:05:00Z' })
    expect(closed && closed.ok && closed.alarm.state).toBe('CLEARED_ACK')
    const unseen = applyAlarmEvent(raisedAlarm(), { type: 'clear', at: '2026-01-01T00:05:00Z' })
    expect(unseen.ok && unseen.alarm.state).toBe('CLEARED_UNACK')
    const late = unseen.ok && applyAlarmEvent(unseen.alarm, { type: 'acknowledge', by: 'us_b', at: '2026-01-01T01:00:00Z', note: 'seen' })
    expect(late && late.ok && late.alarm.state).toBe('CLEARED_ACK')
  })

  it('escalation is due once its time has come, only while nobody acknowledged it and it was not escalated', () => {
    fc.assert(
      fc.property(
        fc.array(eventArb, { maxLength: 10 }),
        fc.boolean(),
        fc.integer({ min: -1000, max: 1000 }),
        (events, escalated, offset) => {
          const alarm = run(events).at(-1)!
          const at = 1_800_000_000_000
          const due = escalationDue(
            { state: alarm.state, escalate_at: new Date(at).toISOString(), escalated_at: escalated ? '2027-01-01T00:00:00Z' : null },
            at + offset,
          )
          expect(due).toBe(!isAcknowledged(alarm.state) && !escalated && offset >= 0)
        },
      ),
    )
  })
})
