import { sql, type Kysely } from 'kysely'

/**
 * What a fleet is paid, and how its dashboard is framed (docs/fleet.md):
 * - `fleets.embed_origins`: the https origins allowed to frame the fleet's dashboard (JSON array);
 * - `rate_cards`: versions of a fleet's rate card, never updated; amounts in minor units, the
 *   after-hours multiplier in ten-thousandths (15000 = ×1.5) so no price goes through a float;
 * - on each delivery, what pricing needs, written by the transaction that made it true:
 *   `rate_card_version` at dispatch (the version in force then), and at its end (the first of
 *   DELIVERED, FAILED, RETURNED) `ended_at` (when the end was recorded: the reconciliation
 *   period it belongs to), `distance_m`, `after_hours` and `on_time`.
 * Deliveries that ended before this step get `ended_at` = their last update and no price inputs:
 * they reconcile as unpriced lines (rate_card_version null).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('fleets')
    .addColumn('embed_origins', 'text', (c) => c.notNull().defaultTo('[]'))
    .execute()
  await db.schema
    .createTable('rate_cards')
    .addColumn('fleet_id', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('currency', 'text', (c) => c.notNull())
    .addColumn('base_fee_cents', 'integer', (c) => c.notNull())
    .addColumn('per_km_cents', 'integer', (c) => c.notNull())
    .addColumn('cold_chain_surcharge_cents', 'integer', (c) => c.notNull())
    .addColumn('failed_attempt_fee_cents', 'integer', (c) => c.notNull())
    .addColumn('after_hours_multiplier_e4', 'integer', (c) => c.notNull())
    .addColumn('commission_bps', 'integer', (c) => c.notNull())
    .addColumn('effective_from', 'text', (c) => c.notNull())
    .addColumn('created_at', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    // One row per version: two concurrent PUTs cannot both take the same number.
    .addPrimaryKeyConstraint('rate_cards_pk', ['fleet_id', 'version'])
    .execute()
  await db.schema.createIndex('rate_cards_in_force').on('rate_cards').columns(['fleet_id', 'effective_from']).execute()
  for (const [name, type] of [
    ['rate_card_version', 'integer'],
    ['ended_at', 'text'],
    ['distance_m', 'integer'],
    ['after_hours', 'integer'],
    ['on_time', 'integer'],
  ] as const) {
    await db.schema.alterTable('deliveries').addColumn(name, type).execute()
  }
  await sql`update deliveries set ended_at = updated_at where status in ('DELIVERED', 'FAILED', 'RETURNED')`.execute(db)
  // A reconciliation reads one fleet's ended deliveries of a period in (ended_at, id) order, and
  // only from this index (it covers every column a line needs: no lookup into the table per
  // row). Partial: open deliveries, whose rows change at every step, are not in it.
  await db.schema
    .createIndex('deliveries_fleet_ended')
    .on('deliveries')
    .columns([
      'fleet_id',
      'ended_at',
      'id',
      'status',
      'pharmacy_id',
      'rate_card_version',
      'distance_m',
      'after_hours',
      'cold_chain_required',
    ])
    .where(sql.ref('ended_at'), 'is not', null)
    .execute()
}
