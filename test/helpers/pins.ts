import { DeliveryPins } from '../../src/services/delivery-pin.js'
import type { TestApi } from './service.js'

/** The PIN a delivery's tracking page shows the patient (null when none is shown), as a test's patient reads it. */
export const pinOf = (api: TestApi, deliveryId: string) => new DeliveryPins(api.service.secrets).reveal(api.service.db, deliveryId)
