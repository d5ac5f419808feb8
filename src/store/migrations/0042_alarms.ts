import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Alarms (docs/api.md, Alarms): one row per excursion or break of a delivery, its lifecycle state
 * (rules/alarm-lifecycle.ts) and when it is due for escalation. `source_key` is the rule event's
 * de-duplication key, unique per delivery, so a replayed event raises nothing twice;
 * `escalated_at` is set by the one conditional UPDATE that wins, so `alarm.escalated` is emitted once.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema
    .createTable('alarms')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('pharmacy_id', 'text', (c) => c.notNull())
    .addColumn('fleet_id', 'text')
    .addColumn('rx_id', 'text')
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('source_key', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull())
    .addColumn('raised_at', 'text', (c) => c.notNull())
    .addColumn('cleared_at', 'text')
    .addColumn('acknowledged_by', 'text')
    .addColumn('acknowledged_at', 'text')
    .addColumn('note', 'text')
    .addColumn('assigned_to', 'text')
    .addColumn('escalate_at', 'text', (c) => c.notNull())
    .addColumn('escalated_at', 'text')
    .addColumn('version', 'integer', (c) => c.notNull().defaultTo(1))
    .execute()
  await db.schema.createIndex('alarms_source').on('alarms').columns(['delivery_id', 'source_key']).unique().execute()
  await db.schema.createIndex('alarms_pharmacy').on('alarms').columns(['pharmacy_id', 'id']).execute()
  await db.schema.createIndex('alarms_fleet').on('alarms').columns(['fleet_id', 'id']).execute()
  // The escalation sweep reads only alarms nobody has acknowledged or escalated yet.
  await db.schema.createIndex('alarms_escalation').on('alarms').columns(['escalated_at', 'escalate_at']).execute()
}
