import { outcomeBundle } from '../domain/fhir-outcome.js'
import { readCustody, toDelivery } from './delivery-shapes.js'
import { fromJson, type Db } from '../store/schema.js'

import type { OutcomeEvent } from '../webhooks/sql-queue.js'

/**
 * Renders a writeback for a pharmacy whose `writeback.format` is `fhir-r4`: the outcome event's
 * delivery, read as it stands, as a FHIR transaction Bundle (src/domain/fhir-outcome.ts).
 */
export function fhirWriteback(db: Db, baseUrl: string) {
  return async function renderFhirWriteback(event: OutcomeEvent): Promise<string> {
    if (!event.delivery_id || !event.rx_id) throw new Error(`writeback event ${event.id} names no delivery`)
    const [row, custody, rx] = await Promise.all([
      db.selectFrom('deliveries').selectAll().where('id', '=', event.delivery_id).executeTakeFirstOrThrow(),
      readCustody(db, event.delivery_id),
      db.selectFrom('prescriptions').select(['patient_id', 'items']).where('id', '=', event.rx_id).executeTakeFirstOrThrow(),
    ])
    const driver = row.driver_id
      ? ((await db.selectFrom('drivers').select(['id', 'name']).where('id', '=', row.driver_id).executeTakeFirst()) ?? null)
      : null
    const bundle = outcomeBundle({
      eventId: event.id,
      at: event.created_at,
      delivery: toDelivery(row, custody),
      rx: { patient_id: rx.patient_id, items: fromJson(rx.items) ?? [] },
      driver,
      baseUrl,
    })
    return JSON.stringify(bundle)
  }
}
