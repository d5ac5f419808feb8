import { escalationDue, type AlarmState } from '../../rules/index.js'
import { iso, type Clock } from '../clock.js'
import type { Outbox } from '../events/outbox.js'
import type { Db } from '../store/schema.js'
import { alarmEvent } from './alarm-events.js'

// Alarms escalated per sweep: a backlog after an outage goes out over the next sweeps.
const ALARMS_PER_SWEEP = 200
const UNACKNOWLEDGED = ['ACTIVE_UNACK', 'CLEARED_UNACK']

/**
 * docs/api.md, Alarms: an alarm nobody acknowledged by its `escalate_at` emits `alarm.escalated`,
 * once. The conditional UPDATE (still unacknowledged, not yet escalated) and the event commit
 * together; of two copies on one PostgreSQL the second UPDATE waits for the first's commit and
 * then matches no row, and a restart finds `escalated_at` set. Answers how many it escalated.
 */
export async function escalateDueAlarms({ db, outbox, clock }: { db: Db; outbox: Outbox; clock: Clock }): Promise<number> {
  const nowMs = clock.now()
  const now = iso(nowMs)
  const due = await db
    .selectFrom('alarms')
    .selectAll()
    .where('escalated_at', 'is', null)
    .where('escalate_at', '<=', now)
    .where('state', 'in', UNACKNOWLEDGED)
    .orderBy('escalate_at')
    .limit(ALARMS_PER_SWEEP)
    .execute()
  let escalated = 0
  for (const row of due.filter((r) => escalationDue({ ...r, state: r.state as AlarmState }, nowMs))) {
    const messages = await db.transaction().execute(async (trx) => {
      const won = await trx
        .updateTable('alarms')
        .set({ escalated_at: now })
        .where('id', '=', row.id)
        .where('escalated_at', 'is', null)
        .where('state', 'in', UNACKNOWLEDGED)
        .executeTakeFirst()
      if (Number(won.numUpdatedRows) === 0) return null // acknowledged meanwhile, or another copy got there first
      return (await outbox.append(trx, [alarmEvent('alarm.escalated', { ...row, escalated_at: now })])).messages
    })
    if (messages === null) continue
    outbox.committed(messages)
    escalated++
  }
  return escalated
}
