import type { TokenService } from '../auth/tokens.js'
import type { Config } from '../config.js'
import type { EventStreams } from '../events/event-stream.js'
import type { BrokerAccounts } from '../mqtt/broker-accounts.js'
import type { ServiceDeps } from '../services/context.js'
import type { ReadingSink } from '../timeseries/sink.js'
import { AlarmService } from '../services/alarms.js'
import { DeliveryService } from '../services/deliveries.js'
import { DriverPositionService } from '../services/driver-positions.js'
import { AttachmentService } from '../services/attachments.js'
import { EventService } from '../services/events.js'
import { FleetDashboardService } from '../services/fleet-dashboard.js'
import { FleetService } from '../services/fleets.js'
import { PharmacyService } from '../services/pharmacies.js'
import { PrescriptionService } from '../services/prescriptions.js'
import { RedeliveryService } from '../services/redeliveries.js'
import { AssessmentService, type PlanChanged } from '../services/assessments.js'
import { ProductService } from '../services/products.js'
import { RateCardService } from '../services/rate-cards.js'
import { ReconciliationService } from '../services/reconciliation.js'
import { ToteService } from '../services/totes.js'
import { WebhookService } from '../services/webhook-endpoints.js'
import { lastPosition } from '../services/driver-positions.js'
import { TrackingService } from '../services/tracking.js'
import { DeliveryPins } from '../services/delivery-pin.js'
import type { PatientNotices } from '../services/patient-notices.js'
import type { TrackingTokens } from '../auth/tracking-tokens.js'

export type ServicesWiring = {
  deps: ServiceDeps
  /** Signs patients' tracking links (docs/api.md, Tracking links). */
  trackingTokens: TrackingTokens
  patientNotices: PatientNotices
  config: Config
  streams: EventStreams
  tokens: Pick<TokenService, 'isRevoked'>
  /** MQTT_PROVISIONING=dynsec: where totes' accounts for the external broker go; null otherwise. */
  accounts: BrokerAccounts | null
  /** Told after a dispatch binds a tote or an ending releases it. */
  toteBindingChanged: (toteId: string, deliveryId: string) => void
  /** Where readings are stored: a redelivery and an assessment replay a leg's ledger from them. */
  sink: ReadingSink
  /** Told after an excursion assessment changed a delivery's stability plan. */
  stabilityPlanChanged: PlanChanged
}

/** The application services, one per resource group, over the same dependencies. */
export function createServices({
  deps,
  config,
  streams,
  tokens,
  accounts,
  toteBindingChanged,
  sink,
  stabilityPlanChanged,
  trackingTokens,
  patientNotices,
}: ServicesWiring) {
  // Delivery PINs are sealed under the store's key-encryption key, like its other secrets.
  const pins = new DeliveryPins(deps.secrets)
  return {
    pharmacies: new PharmacyService(deps, config.WEBHOOK_ALLOW_PRIVATE),
    prescriptions: new PrescriptionService(deps),
    redeliveries: new RedeliveryService(deps, sink),
    assessments: new AssessmentService(deps, sink, stabilityPlanChanged),
    deliveries: new DeliveryService(deps, pins, toteBindingChanged, sink),
    attachments: new AttachmentService(deps, config.UPLOAD_READ_TIMEOUT_S * 1_000),
    alarms: new AlarmService(deps),
    fleets: new FleetService(deps),
    positions: new DriverPositionService(deps),
    rateCards: new RateCardService(deps),
    products: new ProductService(deps),
    reconciliation: new ReconciliationService(deps),
    dashboards: new FleetDashboardService(deps, lastPosition),
    totes: new ToteService(deps, config.TENANT_MAX_TOTES, accounts ?? undefined),
    events: new EventService(deps, streams, (jti) => tokens.isRevoked(jti)),
    webhooks: new WebhookService(deps, config.WEBHOOK_ALLOW_PRIVATE, config.TENANT_MAX_WEBHOOKS),
    tracking: new TrackingService(deps, trackingTokens, patientNotices, (db, id) => pins.reveal(db, id)),
  }
}

export type Services = ReturnType<typeof createServices>
