import type { ColdChain } from './cold-chain.js'
import type { CustodyEvent, CustodyType } from './custody-event.js'
import { gtinFromNdc, gtinOf, sglnOf, sgtin, sgtinClass, type Gtin } from './gs1.js'

/**
 * A delivery's custody chain as GS1 EPCIS 2.0 ObjectEvents (docs/interop.md, EPCIS). Pure: the
 * caller reads the delivery, its items, its pharmacy and the readings of each sensor interval,
 * and gets the events back as JSON-LD objects in the EPCIS 2.0 JSON binding.
 */

/** GS1's published JSON-LD context of EPCIS 2.0, and ours for the extension members. */
const EPCIS_CONTEXT = 'https://ref.gs1.org/standards/epcis/2.0.0/epcis-context.jsonld'
const RXTRACE_NAMESPACE = 'https://rxtrace.dev/ns/epcis#'
export const epcisContext = [EPCIS_CONTEXT, { rxtrace: RXTRACE_NAMESPACE }]

/**
 * CBV 2.0 §7.2–7.3: the business step and disposition of each custody handoff. The goods are in
 * transit from the pickup on, dispensed at the patient's door, and back at the pharmacy on a
 * return: `damaged` when a pharmacist decided to take back a broken cold chain. A reattempt after
 * a failed attempt is the goods `departing` again, still `in_transit` (the failed attempt itself
 * moves nothing and is no EPCIS event).
 */
const HANDOFFS: Partial<Record<CustodyType, { bizStep: string; disposition: (d: EpcisDelivery) => string }>> = {
  picked_up: { bizStep: 'shipping', disposition: () => 'in_transit' },
  handoff: { bizStep: 'transporting', disposition: () => 'in_transit' },
  reattempted: { bizStep: 'departing', disposition: () => 'in_transit' },
  delivered: { bizStep: 'dispensing', disposition: () => 'dispensed' },
  returned: { bizStep: 'receiving', disposition: (d) => (d.cold_chain.disposition?.decision === 'return' ? 'damaged' : 'returned') },
}

/** The custody event types that become EPCIS events. */
export const EPCIS_CUSTODY_TYPES = Object.keys(HANDOFFS) as CustodyType[]

/** Where the tote's binding, and so the first sensor interval, starts. */
const BINDING_START: CustodyType = 'dispatched'

export type EpcisDelivery = {
  id: string
  tote_id: string | null
  created_at: string
  custody: readonly CustodyEvent[]
  cold_chain: Pick<ColdChain, 'required' | 'excursions' | 'disposition'>
}
export type EpcisItem = { ndc?: string | undefined; gtin?: string | undefined; quantity: number; serials?: string[] | undefined }
export type EpcisPharmacy = { id: string; gln: string | null; timezone: string }

/** The readings between two custody events: one per handoff, from the previous handoff (or the dispatch) to it. */
export type SensorInterval = { seq: number; fromMs: number; toMs: number }
export type IntervalReadings = { min: number; max: number; mean: number; n: number }

export type EpcisInput = {
  delivery: EpcisDelivery
  items: readonly EpcisItem[]
  pharmacy: EpcisPharmacy
  /** Public base URL of the service (ISSUER): pharmacies without a GLN, totes and traces are named by URL. */
  baseUrl: string
  /** The readings of each interval by the seq of the handoff that ends it; absent when it had none. */
  readings: ReadonlyMap<number, IntervalReadings>
}

export type ObjectEvent = Record<string, unknown> & { type: 'ObjectEvent'; eventTime: string }

/** The sensor intervals a cold-chain delivery's events report on; none without a cold chain or a tote. */
export function sensorIntervals(delivery: EpcisDelivery): SensorInterval[] {
  if (!delivery.cold_chain.required || !delivery.tote_id) return []
  const intervals: SensorInterval[] = []
  let fromMs = Date.parse(delivery.custody.find((e) => e.type === BINDING_START)?.occurred_at ?? delivery.created_at)
  for (const event of delivery.custody) {
    if (!HANDOFFS[event.type]) continue
    const toMs = Date.parse(event.occurred_at)
    intervals.push({ seq: event.seq, fromMs, toMs })
    fromMs = toMs
  }
  return intervals
}

/** The delivery's EPCIS events, oldest first; `only` keeps the events of those seqs. */
export function objectEvents(input: EpcisInput, only?: ReadonlySet<number>): ObjectEvent[] {
  const { delivery, pharmacy, baseUrl } = input
  const place = pharmacy.gln ? sglnOf(pharmacy.gln) : `${baseUrl}/v1/pharmacies/${pharmacy.id}`
  const what = itemsOf(input.items)
  const intervals = new Map(sensorIntervals(delivery).map((i) => [i.seq, i]))
  const events: ObjectEvent[] = []
  for (const custody of delivery.custody) {
    const step = HANDOFFS[custody.type]
    if (!step || (only && !only.has(custody.seq))) continue
    const interval = intervals.get(custody.seq)
    const sensors = interval ? sensorElement(input, interval, custody.temperature) : null
    events.push({
      type: 'ObjectEvent',
      eventID: eventIdOf(custody.hash),
      eventTime: custody.occurred_at,
      recordTime: custody.recorded_at,
      eventTimeZoneOffset: timeZoneOffset(pharmacy.timezone, Date.parse(custody.occurred_at)),
      ...what,
      action: 'OBSERVE',
      bizStep: step.bizStep,
      disposition: step.disposition(delivery),
      readPoint: { id: place },
      // CBV: goods in transit or dispensed to a patient are at no business location; a return brings them back.
      ...(custody.type === 'returned' ? { bizLocation: { id: place } } : {}),
      ...(sensors ? { sensorElementList: [sensors] } : {}),
      'rxtrace:deliveryId': delivery.id,
      'rxtrace:custodySeq': custody.seq,
      'rxtrace:custodyHash': custody.hash,
      // The member the custody hash covers, as recorded (docs/api.md, Temperature at each handoff): a reading may be absent from the sensor report.
      ...(custody.temperature ? { 'rxtrace:handoffTemperature': custody.temperature } : {}),
    })
  }
  return events
}

/** Serialised units as SGTINs (`epcList`), the rest as GTIN classes with their quantity; items with neither GTIN nor NDC are not named. */
function itemsOf(items: readonly EpcisItem[]): { epcList?: string[]; quantityList?: { epcClass: string; quantity: number }[] } {
  const epcList: string[] = []
  const quantities = new Map<string, number>()
  for (const item of items) {
    const gtin: Gtin | null = item.gtin ? gtinOf(item.gtin) : item.ndc ? gtinFromNdc(item.ndc) : null
    if (!gtin) continue
    if (item.serials?.length) epcList.push(...item.serials.map((serial) => sgtin(gtin, serial)))
    else quantities.set(sgtinClass(gtin), (quantities.get(sgtinClass(gtin)) ?? 0) + item.quantity)
  }
  const quantityList = [...quantities].map(([epcClass, quantity]) => ({ epcClass, quantity }))
  // EPCIS 2.0 §7.3.2: an ObjectEvent names its objects by instance, by class, or both; an empty epcList says "none named".
  if (!quantityList.length) return { epcList }
  return epcList.length ? { epcList, quantityList } : { quantityList }
}

/**
 * EPCIS 2.0 §9 (sensor data): the tote's readings over the interval the handoff closes, as CEL
 * minimum, maximum and mean, and one ALARM_CONDITION report per excursion overlapping it.
 */
function sensorElement(
  { delivery, baseUrl, readings }: EpcisInput,
  interval: SensorInterval,
  atHandoff: CustodyEvent['temperature'],
): Record<string, unknown> | null {
  const figures = readings.get(interval.seq)
  // The newest reading at the handoff itself, a point value beside the interval's figures.
  const handoff =
    atHandoff && atHandoff.last_c !== null && atHandoff.at !== null
      ? [{ type: 'gs1:Temperature', uom: 'CEL', value: atHandoff.last_c, time: atHandoff.at, 'rxtrace:atHandoff': true }]
      : []
  const alarms = delivery.cold_chain.excursions
    .filter((e) => Date.parse(e.started_at) < interval.toMs && (e.ended_at === null || Date.parse(e.ended_at) > interval.fromMs))
    .map((e) => ({
      type: 'gs1:Temperature',
      exception: 'ALARM_CONDITION',
      time: new Date(Math.max(Date.parse(e.started_at), interval.fromMs)).toISOString(),
      ...(e.peak_c === null ? {} : { value: e.peak_c, uom: 'CEL' }),
      'rxtrace:excursionKind': e.kind,
      'rxtrace:excursionStartedAt': e.started_at,
      'rxtrace:excursionDurationS': e.duration_s,
    }))
  if (!figures && !alarms.length && !handoff.length) return null
  const from = new Date(interval.fromMs).toISOString()
  const to = new Date(interval.toMs).toISOString()
  return {
    sensorMetadata: {
      startTime: from,
      endTime: to,
      deviceID: `${baseUrl}/v1/totes/${delivery.tote_id}`,
      // The trace of the interval; `Accept: text/csv` gives its CSV (docs/api.md, Telemetry).
      rawData: `${baseUrl}/v1/deliveries/${delivery.id}/temperature?from=${from}&to=${to}`,
    },
    sensorReport: [
      ...(figures
        ? [
            {
              type: 'gs1:Temperature',
              uom: 'CEL',
              minValue: figures.min,
              maxValue: figures.max,
              meanValue: figures.mean,
              'rxtrace:readings': figures.n,
            },
          ]
        : []),
      ...handoff,
      ...alarms,
    ],
  }
}

/**
 * A stable event ID from the custody hash: its first 128 bits as an RFC 9562 version 8 UUID
 * (custom, here "derived from the custody hash"), so the same event always has the same ID.
 */
function eventIdOf(hash: string): string {
  const hex = hash
    .replace(/^sha256:/, '')
    .slice(0, 32)
    .split('')
  hex[12] = '8'
  hex[16] = ((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  const h = hex.join('')
  return `urn:uuid:${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`
}

/** EPCIS 2.0 §7.4.1 eventTimeZoneOffset: the pharmacy's offset from UTC at that instant (`-05:00`). */
function timeZoneOffset(timeZone: string, atMs: number): string {
  const name = offsetFormat(timeZone)
    .formatToParts(atMs)
    .find((p) => p.type === 'timeZoneName')?.value
  const m = /^GMT([+-]\d{2}):?(\d{2})?$/.exec(name ?? '')
  return m ? `${m[1]}:${m[2] ?? '00'}` : '+00:00'
}

// One formatter per time zone: building one costs far more than using it, and pharmacies share a handful of zones.
const offsetFormats = new Map<string, Intl.DateTimeFormat>()
function offsetFormat(timeZone: string): Intl.DateTimeFormat {
  let format = offsetFormats.get(timeZone)
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' })
    if (offsetFormats.size < 1_000) offsetFormats.set(timeZone, format)
  }
  return format
}

/** The EPCISDocument of a delivery (EPCIS 2.0 §8.2.9 JSON binding). */
export function epcisDocument(events: readonly ObjectEvent[], creationDate: string) {
  return {
    '@context': epcisContext,
    type: 'EPCISDocument',
    schemaVersion: '2.0',
    creationDate,
    epcisBody: { eventList: events },
  }
}
