import { sql } from 'kysely'
import { iso } from '../clock.js'
import { newId } from '../ids.js'
import { envelopeFromRow, type Outbox } from '../services/outbox.js'
import type { Db, Executor } from '../store/schema.js'
import type { AttemptRecord, ClaimRequest, DeliveryQueue, PendingDelivery } from './delivery-queue.js'

/**
 * The dispatcher's queue over the entity store (SQLite or PostgreSQL). A claim leases rows by a
 * conditional update, so two dispatchers never attempt the same row at once and a crashed one's
 * rows come due again when their lease runs out.
 */
export class SqlDeliveryQueue implements DeliveryQueue {
  constructor(private readonly db: Db, private readonly outbox: Outbox) {}

  async claimDue({ nowMs, limit, perEndpointLimit, excludeEndpointIds, leaseUntilMs }: ClaimRequest): Promise<PendingDelivery[]> {
    const excluded = excludeEndpointIds.length ? sql`and m.endpoint_id not in (${sql.join(excludeEndpointIds)})` : sql``
    const candidates = await sql<{ id: string }>`
      select id from (
        select m.id, m.next_attempt_at, row_number() over (partition by m.endpoint_id order by m.next_attempt_at, m.id) as rank
        from webhook_messages m join webhook_endpoints e on e.id = m.endpoint_id
        where m.state = 'pending' and m.next_attempt_at <= ${nowMs} and (m.lease_until is null or m.lease_until <= ${nowMs})
          and e.enabled = 1 ${excluded}
      ) due where rank <= ${perEndpointLimit} order by next_attempt_at, id limit ${limit}`.execute(this.db)
    if (candidates.rows.length === 0) return []
    const claimed = await this.db.updateTable('webhook_messages').set({ lease_until: leaseUntilMs })
      .where('id', 'in', candidates.rows.map((r) => r.id))
      .where((eb) => eb.or([eb('lease_until', 'is', null), eb('lease_until', '<=', nowMs)]))
      .returning('id').execute()
    if (claimed.length === 0) return []
    const rows = await this.db.selectFrom('webhook_messages as m')
      .innerJoin('webhook_endpoints as e', 'e.id', 'm.endpoint_id')
      .innerJoin('events as ev', 'ev.id', 'm.event_id')
      .select(['m.id as message_id', 'm.attempts', 'e.id as endpoint_id', 'e.url', 'e.secret', 'e.previous_secret', 'e.previous_secret_expires_at', 'e.failing_since'])
      .select(['ev.id', 'ev.type', 'ev.created_at', 'ev.pharmacy_id', 'ev.fleet_id', 'ev.delivery_id', 'ev.rx_id', 'ev.seq', 'ev.data'])
      .where('m.id', 'in', claimed.map((r) => r.id))
      .execute()
    return rows.map((row) => ({
      id: row.message_id,
      endpointId: row.endpoint_id,
      url: row.url,
      secrets: row.previous_secret && (row.previous_secret_expires_at ?? 0) > nowMs ? [row.secret, row.previous_secret] : [row.secret],
      eventId: row.id,
      body: JSON.stringify(envelopeFromRow(row)),
      attempt: row.attempts + 1,
      endpointFailingSinceMs: row.failing_since,
    }))
  }

  async recordAttempt(record: AttemptRecord): Promise<void> {
    const finished = record.success || record.nextAttemptAtMs === null
    await this.db.transaction().execute(async (trx) => {
      await trx.insertInto('webhook_attempts').values({
        id: newId('att'), message_id: record.deliveryId, endpoint_id: record.endpointId, event_id: record.eventId,
        attempt: record.attempt, at: iso(record.attemptedAtMs), status_code: record.statusCode, error: record.error,
        duration_ms: Math.round(record.durationMs), success: record.success ? 1 : 0,
      }).execute()
      await trx.updateTable('webhook_messages').set({
        state: record.success ? 'delivered' : finished ? 'failed' : 'pending',
        attempts: record.attempt, next_attempt_at: record.nextAttemptAtMs, lease_until: null,
      }).where('id', '=', record.deliveryId).execute()
      await trx.updateTable('webhook_endpoints').set((eb) => ({
        failing_since: record.success ? null : eb.fn.coalesce('failing_since', eb.val(record.attemptedAtMs)),
        ...(record.disable ? { enabled: 0, disabled_reason: record.disable === '410' ? 'gone' : 'failing_for_5_days' } : {}),
      })).where('id', '=', record.endpointId).execute()
      if (finished) await this.announceWriteback(trx, record)
    })
    if (finished) this.outbox.committed()
  }

  /** SPEC §7: a writeback's final outcome is itself an event (writeback.completed | writeback.failed). */
  private async announceWriteback(trx: Executor, record: AttemptRecord) {
    const endpoint = await trx.selectFrom('webhook_endpoints').select(['kind', 'pharmacy_id']).where('id', '=', record.endpointId).executeTakeFirst()
    if (endpoint?.kind !== 'writeback') return
    const outcome = await trx.selectFrom('events').selectAll().where('id', '=', record.eventId).executeTakeFirstOrThrow()
    await this.outbox.append(trx, [{
      type: record.success ? 'writeback.completed' : 'writeback.failed',
      pharmacy_id: outcome.pharmacy_id, fleet_id: outcome.fleet_id, delivery_id: outcome.delivery_id, rx_id: outcome.rx_id,
      data: {
        outcome_event_id: outcome.id, outcome: outcome.type, attempts: record.attempt,
        status_code: record.statusCode, error: record.error,
      },
    }])
  }
}
