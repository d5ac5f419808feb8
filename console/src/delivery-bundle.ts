import {
  api,
  type Alarm,
  type Delivery,
  type Page,
  type Party,
  type Pharmacy,
  type Position,
  type Prescription,
  type Tote,
  type Trace,
} from './api'
import { verifyInBrowser, type Verdict } from './chain'

/** Everything a delivery's page shows, fetched at once; the custody chain verified here, in the browser. */
export type Bundle = {
  delivery: Delivery
  rx: Prescription
  pharmacy: Pharmacy
  parties: Map<string, Party>
  trace: Trace
  verdict: Verdict
  /** The tote and its sensor's calibration; null without a tote, or one the account may not read. */
  tote: Tote | null
  alarms: Alarm[]
  /** Where the driver was last seen, while the delivery is in progress (DISPATCHED, PICKED_UP); null otherwise or before any position. */
  lastSeen: Position | null
}

const ENDING = new Set(['delivered', 'returned', 'cancelled'])
const IN_PROGRESS = new Set(['DISPATCHED', 'PICKED_UP'])
/** Buckets to ask for: fine enough to see a door opening, few enough to draw at once (the API allows 10,000). */
const TARGET_POINTS = 4_000

export async function loadBundle(id: string): Promise<Bundle> {
  const delivery = await api<Delivery>(`/v1/deliveries/${encodeURIComponent(id)}`)
  const start = Date.parse(delivery.custody.find((e) => e.type === 'dispatched')?.occurred_at ?? delivery.created_at)
  const ended = [...delivery.custody].reverse().find((e) => ENDING.has(e.type))
  const end = ended ? Date.parse(ended.occurred_at) : Date.now()
  const step = Math.max(1, Math.ceil((end - start) / 1000 / TARGET_POINTS))
  const [rx, pharmacy, parties, trace, tote, alarms, positions] = await Promise.all([
    api<Prescription>(`/v1/prescriptions/${delivery.rx_id}`),
    api<Pharmacy>(`/v1/pharmacies/${delivery.pharmacy_id}`),
    api<{ data: Party[] }>(`/v1/deliveries/${delivery.id}/parties`),
    api<Trace>(`/v1/deliveries/${delivery.id}/temperature?step=${step}s`),
    delivery.tote_id ? api<Tote>(`/v1/totes/${delivery.tote_id}`).catch(() => null) : null,
    api<Page<Alarm>>(`/v1/alarms?delivery_id=${delivery.id}&limit=100`),
    // The newest position alone; the page still shows without it.
    IN_PROGRESS.has(delivery.status)
      ? api<Page<Position>>(`/v1/deliveries/${delivery.id}/locations?order=desc&limit=1`).catch(() => null)
      : null,
  ])
  const verdict = await verifyInBrowser(rx, delivery.id, delivery.custody)
  return {
    delivery,
    rx,
    pharmacy,
    parties: new Map(parties.data.map((p) => [p.id, p])),
    trace,
    verdict,
    tote,
    alarms: alarms.data,
    lastSeen: positions?.data[0] ?? null,
  }
}

/** A party's name and id as the custody chain names it. */
export const nameOf = (b: Bundle, id: string | null) => {
  if (!id) return '—'
  if (id === 'patient') return 'the patient'
  const p = b.parties.get(id)
  return p ? `${p.name} (${id})` : id
}
