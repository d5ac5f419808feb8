/**
 * The topics a tote uses (broker/README.md, Topics). Tote ids are `tt_` + ULID, so they never contain the MQTT
 * level separator or wildcards; `isTopicSafeId` enforces that before an id is put in a topic.
 */

const PREFIX = 'rxtrace/v1/totes/'

/** A tote publishes its readings here, and nowhere else. */
export const readingsTopic = (toteId: string): string => `${PREFIX}${toteId}/readings`
/** The broker publishes `{error, reason, at}` here when a tote's payload is refused. */
export const errorsTopic = (toteId: string): string => `${PREFIX}${toteId}/errors`
/** Reserved for messages to the tote (configuration, acknowledgements of commands). */
export const commandsTopic = (toteId: string): string => `${PREFIX}${toteId}/commands`

/** True for any tote's readings topic: ingest-only, never routed to subscribers. */
function isReadingsTopic(topic: string): boolean {
  return topic.startsWith(PREFIX) && topic.endsWith('/readings')
}

// Drivers (docs/fleet.md, Live location and ETA): a driver's app connects as the driver.
const DRIVERS = 'rxtrace/v1/drivers/'

/** Driver ids are `dr_` + ULID; every other authenticated client of the broker is a tote. */
export const isDriverId = (id: string): boolean => id.startsWith('dr_')
/** A driver publishes its positions here, and nowhere else. */
const locationTopic = (driverId: string): string => `${DRIVERS}${driverId}/location`
/** The broker publishes `{error, reason, at}` here when a driver's positions are refused. */
export const driverErrorsTopic = (driverId: string): string => `${DRIVERS}${driverId}/errors`

/** The one topic a client (tote or driver) may publish to. */
export const ownPublishTopic = (id: string): string => (isDriverId(id) ? locationTopic(id) : readingsTopic(id))
/** Where a client's refused payloads are explained. */
export const ownErrorsTopic = (id: string): string => (isDriverId(id) ? driverErrorsTopic(id) : errorsTopic(id))

/** True for topics consumed by the broker's hooks (readings, positions): never routed to subscribers. */
export function isIngestTopic(topic: string): boolean {
  return isReadingsTopic(topic) || (topic.startsWith(DRIVERS) && topic.endsWith('/location'))
}

/** True for any tote's errors topic. */
export function isErrorsTopic(topic: string): boolean {
  return topic.startsWith(PREFIX) && topic.endsWith('/errors')
}

/**
 * Letters, digits and `_`: safe as one topic level, and free of the `-` that separates a tote
 * id from a client id's suffix (see hooks/authenticate.ts).
 */
export function isTopicSafeId(id: string): boolean {
  return /^[A-Za-z0-9_]{1,128}$/.test(id)
}
