import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * Calibrated sensors (docs/api.md, Totes: sensor and calibration): a tote's sensor record as
 * JSON, the pharmacy's `calibration_policy` (rows from before keep `refuse`, the default for new
 * ones too) and `escalate_after_s` for alarms (docs/api.md, Alarms), and the warnings a delivery
 * carries from its dispatch (a tote dispatched past its calibration under `warn`).
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('totes').addColumn('sensor', 'text').execute()
  await db.schema
    .alterTable('pharmacies')
    .addColumn('calibration_policy', 'text', (c) => c.notNull().defaultTo('refuse'))
    .execute()
  // 900 s: fifteen minutes, the spec's default before an unacknowledged alarm is escalated.
  await db.schema
    .alterTable('pharmacies')
    .addColumn('escalate_after_s', 'integer', (c) => c.notNull().defaultTo(900))
    .execute()
  await db.schema.alterTable('deliveries').addColumn('warnings', 'text').execute()
}
