import { Migrator, type Kysely, type Migration } from 'kysely'
import type { Dialect } from '../dialect.js'
import type { MigrationStep } from './types.js'
import { up as foundation } from './0001_foundation.js'
import { up as webhooks } from './0002_webhooks.js'
import { up as partialIndexes } from './0003_partial_indexes.js'
import { up as privilegeWalls } from './0004_privilege_walls.js'
import { up as tenantLimits } from './0005_tenant_limits.js'
import { up as eventCursor } from './0006_event_cursor.js'
import { up as usersAndSignin } from './0007_users_and_signin.js'
import { up as fleetMoney } from './0008_fleet_money.js'
import { up as sharedReadings } from './0009_shared_readings.js'
import { up as userConsents } from './0010_user_consents.js'
import { up as attentionQueue } from './0012_attention_queue.js'
import { up as brokerAccounts } from './0014_broker_accounts.js'
import { up as auditTenant } from './0015_audit_tenant.js'
import { up as driverDeliveries } from './0017_driver_deliveries.js'
import { up as sharedLimits } from './0018_shared_limits.js'
import { up as ingestSessions } from './0020_ingest_sessions.js'
import { up as products } from './0030_products.js'
import { up as deliveryStability } from './0031_delivery_stability.js'
import { up as releasePolicy } from './0032_release_policy.js'
import { up as deliveryLegs } from './0033_delivery_legs.js'
import { up as stabilityAssessments } from './0034_stability_assessments.js'
import { up as auditSignatures } from './0035_audit_signatures.js'
import { up as eSignatures } from './0036_e_signatures.js'
import { up as signedStabilityVersions } from './0037_signed_stability_versions.js'
import { up as signedAssessments } from './0038_signed_assessments.js'
import { up as auditFilters } from './0039_audit_filters.js'
import { up as sensors } from './0041_sensors.js'
import { up as alarms } from './0042_alarms.js'
import { up as pharmacyGln } from './0045_pharmacy_gln.js'
import { up as epcisEvents } from './0046_epcis_events.js'
import { up as interopWebhooks } from './0047_interop_webhooks.js'
import { up as fleetTimezone } from './0049_fleet_timezone.js'
import { up as proofOfDelivery } from './0050_proof_of_delivery.js'
import { up as attemptsAndHandoffTemperature } from './0053_attempts_and_handoff_temperature.js'
import { up as driverPositions } from './0055_driver_positions.js'
import { up as pharmacyContact } from './0058_pharmacy_contact.js'
import { up as readingPartitions } from './0061_reading_partitions.js'
import { up as recordExpiry } from './0062_record_expiry.js'
import { up as historyIndexes } from './0064_history_indexes.js'
import { up as openDeliveriesIndex } from './0065_open_deliveries_index.js'
import { up as bindingIndexes } from './0066_binding_indexes.js'
import { up as bindingFollowPending } from './0067_binding_follow_pending.js'
import { up as fleetIndexesPartial } from './0068_fleet_indexes_partial.js'

/** Applied at start-up in name order. Append new steps; never edit one that has shipped. */
const steps: Record<string, MigrationStep> = {
  '0001_foundation': foundation,
  '0002_webhooks': webhooks,
  '0003_partial_indexes': partialIndexes,
  '0004_privilege_walls': privilegeWalls,
  '0005_tenant_limits': tenantLimits,
  '0006_event_cursor': eventCursor,
  '0007_users_and_signin': usersAndSignin,
  '0008_fleet_money': fleetMoney,
  '0009_shared_readings': sharedReadings,
  '0010_user_consents': userConsents,
  '0012_attention_queue': attentionQueue,
  '0014_broker_accounts': brokerAccounts,
  '0015_audit_tenant': auditTenant,
  '0017_driver_deliveries': driverDeliveries,
  '0018_shared_limits': sharedLimits,
  '0020_ingest_sessions': ingestSessions,
  '0030_products': products,
  '0031_delivery_stability': deliveryStability,
  '0032_release_policy': releasePolicy,
  '0033_delivery_legs': deliveryLegs,
  '0034_stability_assessments': stabilityAssessments,
  '0035_audit_signatures': auditSignatures,
  '0036_e_signatures': eSignatures,
  '0037_signed_stability_versions': signedStabilityVersions,
  '0038_signed_assessments': signedAssessments,
  '0039_audit_filters': auditFilters,
  '0041_sensors': sensors,
  '0042_alarms': alarms,
  '0045_pharmacy_gln': pharmacyGln,
  '0046_epcis_events': epcisEvents,
  '0047_interop_webhooks': interopWebhooks,
  '0049_fleet_timezone': fleetTimezone,
  '0050_proof_of_delivery': proofOfDelivery,
  '0053_attempts_and_handoff_temperature': attemptsAndHandoffTemperature,
  '0055_driver_positions': driverPositions,
  '0058_pharmacy_contact': pharmacyContact,
  '0061_reading_partitions': readingPartitions,
  '0062_record_expiry': recordExpiry,
  '0064_history_indexes': historyIndexes,
  '0065_open_deliveries_index': openDeliveriesIndex,
  '0066_binding_indexes': bindingIndexes,
  '0067_binding_follow_pending': bindingFollowPending,
  '0068_fleet_indexes_partial': fleetIndexesPartial,
}

/** `schema` (PostgreSQL) is where the store's tables live; the migrator keeps its own tables there too. */
export async function migrateToLatest(db: Kysely<any>, dialect: Dialect, schema?: string): Promise<void> {
  const migrations: Record<string, Migration> = {}
  for (const [name, step] of Object.entries(steps)) migrations[name] = { up: (d) => step(d, dialect) }
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(schema ? { migrationTableSchema: schema } : {}),
  })
  const { error, results } = await migrator.migrateToLatest()
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown'
    throw new Error(`migration ${failed} failed: ${(error as Error).message}`)
  }
}
