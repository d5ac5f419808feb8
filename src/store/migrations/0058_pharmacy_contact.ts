import type { Kysely } from 'kysely'
import type { Dialect } from '../dialect.js'

/**
 * A pharmacy's `phone` (E.164), which its patients' tracking page shows, and `patient_notify`
 * (docs/api.md, Patient notifications): whether the service raises `patient.notify` events,
 * each with a tracking URL, for the pharmacy's own SMS or e-mail provider. Pharmacies from
 * before have no phone and do not opt in.
 */
export async function up(db: Kysely<any>, _dialect: Dialect): Promise<void> {
  await db.schema.alterTable('pharmacies').addColumn('phone', 'text').execute()
  await db.schema
    .alterTable('pharmacies')
    .addColumn('patient_notify', 'integer', (c) => c.notNull().defaultTo(0))
    .execute()
}
