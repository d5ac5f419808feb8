import { nameOf, type Bundle } from './delivery-bundle'
import type { CustodyEvent } from './api'
import { budgetSection } from './budget'
import { chartPanel } from './chart'
import { dispositionSection } from './disposition'
import { signatureLine } from './signature'
import { alarmsSection } from './alarms'
import { BREAK_REASONS, celsius, dateTime, distanceM, duration, h, km, untilEta } from './format'

// A delivery on its way: its ETA is still something to expect.
const OPEN = new Set(['QUEUED', 'DISPATCHED', 'PICKED_UP'])

// The sections of a delivery's report, on its page and on the printable report (#/print/…):
// what was prescribed, the profile, status and times in the pharmacy's time zone, the chart, the
// summary, the disposition and the custody timeline.

function facts(b: Bundle): HTMLElement {
  const { delivery: d, rx, pharmacy } = b
  const tz = pharmacy.timezone
  const profile = d.cold_chain.profile
  const row = (k: string, v: Node | string) => [h('dt', {}, k), h('dd', {}, v)]
  const items = rx.items?.length
    ? h(
        'ul',
        { class: 'items' },
        ...rx.items.map((i) => h('li', {}, `${i.quantity ?? 1} × ${i.description}${i.ndc ? ` (NDC ${i.ndc})` : ''}`)),
      )
    : 'none listed'
  return h(
    'section',
    { class: 'facts', 'aria-labelledby': 'facts-h' },
    h('h2', { id: 'facts-h' }, 'Prescription'),
    h(
      'dl',
      {},
      ...row('Prescription', rx.rx_id),
      ...row('Patient', rx.patient_id),
      ...row('Items', items),
      ...row(
        'Profile',
        profile
          ? `${profile.name}: ${profile.min_c} to ${profile.max_c} °C${profile.hard_min_c !== null ? `, never below ${profile.hard_min_c} °C` : ''}${profile.hard_max_c !== null ? `, never above ${profile.hard_max_c} °C` : ''}`
          : 'no cold chain',
      ),
      ...row('Status', d.status),
      ...row('Pharmacy', `${pharmacy.name} (${tz})`),
      ...row('Created', dateTime(d.created_at, tz)),
      ...row('ETA', OPEN.has(d.status) ? `${dateTime(d.eta, tz)} (${untilEta(d.eta, Date.now())})` : dateTime(d.eta, tz)),
      ...row('Driver', d.driver_id ? driverAndPosition(b, b.parties.get(d.driver_id)?.name ?? 'assigned') : 'not assigned'),
      ...(rx.deliver_by ? row('Deliver by', dateTime(rx.deliver_by, tz)) : []),
      ...row('Tote', toteAndSensor(b)),
      ...(b.delivery.warnings ?? [])
        .filter((w) => w.code !== 'sensor_unrecorded') // said beside the tote already
        .flatMap((w) => row('Warning', h('strong', { class: 'warning' }, w.message))),
    ),
  )
}

/**
 * The driver, and while the delivery is in progress where they were last seen: "Dana Driver — seen
 * 2 min ago, 1.2 km from the address", with the coordinates as a link to openstreetmap.org (as the
 * fleet embed does; no map is loaded here).
 */
function driverAndPosition(b: Bundle, name: string): Node | string {
  const p = b.lastSeen
  if (!p) return name
  const address = b.rx.delivery_address
  const door = typeof address?.lat === 'number' && typeof address.lng === 'number' ? { lat: address.lat, lng: address.lng } : null
  const ago = duration(Math.max(0, (Date.now() - Date.parse(p.at)) / 1000))
  const link = h(
    'a',
    {
      href: `https://www.openstreetmap.org/?mlat=${p.lat}&mlon=${p.lng}#map=17/${p.lat}/${p.lng}`,
      target: '_blank',
      rel: 'noopener noreferrer',
      'aria-label': `Last position of ${name} on a map (opens a new tab)`,
    },
    `${p.lat.toFixed(5)}, ${p.lng.toFixed(5)}`,
  )
  return h(
    'span',
    { class: 'last-seen' },
    `${name} — seen ${ago} ago${door ? `, ${km(distanceM(p, door))} from the address` : ''} (${dateTime(p.at, b.pharmacy.timezone)}) · `,
    link,
  )
}

/** The tote, its sensor and the sensor's calibration (ISO/IEC 17025 certificate), on one line: the report names what judged the cold chain. */
function toteAndSensor(b: Bundle): string {
  const d = b.delivery
  if (!d.tote_id) return '—'
  const tote = b.tote ? `${b.tote.serial} (${b.tote.id})` : d.tote_id
  const sensor = b.tote?.sensor
  if (!sensor) return `${tote}; no sensor record: calibration unknown`
  const tz = b.pharmacy.timezone
  return `${tote}; sensor ${sensor.serial}, ${sensor.model}, ±${sensor.accuracy_c} °C; certificate ${sensor.certificate_ref}; calibrated ${dateTime(sensor.calibrated_at, tz)}, calibration due ${dateTime(sensor.calibration_due, tz)}`
}

function coldChainHeader(b: Bundle): HTMLElement {
  const c = b.delivery.cold_chain
  const broke =
    c.state === 'BROKEN'
      ? h(
          'p',
          { class: 'break' },
          h('strong', {}, 'Cold chain broken'),
          ` at ${dateTime(c.broken_at, b.pharmacy.timezone)}: ${BREAK_REASONS[c.break_reason ?? ''] ?? c.break_reason}.`,
        )
      : null
  return h('div', { class: 'state-line' }, h('span', { class: `badge badge-${c.state.toLowerCase()}` }, `Cold chain ${c.state}`), broke)
}

function summary(b: Bundle): HTMLElement {
  const s = b.trace.summary
  const unknown = s.unknown_s ?? b.delivery.cold_chain.unknown_s
  const row = (k: string, v: string) => [h('dt', {}, k), h('dd', {}, v)]
  return h(
    'section',
    { class: 'summary', 'aria-labelledby': 'summary-h' },
    h('h2', { id: 'summary-h' }, 'Summary'),
    h(
      'dl',
      {},
      ...row('Minimum', celsius(s.min_c)),
      ...row('Maximum', celsius(s.max_c)),
      ...row('Mean kinetic temperature', celsius(s.mkt_c)),
      ...row('Time out of range', duration(s.time_out_of_range_s)),
      ...row('Of which unknown (no signal)', duration(unknown)),
      ...row('As of', dateTime(s.as_of ?? b.trace.to, b.pharmacy.timezone)),
    ),
  )
}

/** Why an attempt failed, in the pharmacist's words (docs/api.md, Attempts). */
const FAILURE_REASONS: Record<string, string> = {
  patient_unavailable: 'patient unavailable',
  address_problem: 'address problem',
  refused: 'refused by the patient',
  unsafe: 'unsafe to deliver',
  other: 'other reason',
}

function eventLabel(e: CustodyEvent): string {
  if (e.type === 'failed' && e.attempt)
    return `Attempt ${e.attempt.number} failed: ${e.attempt.reason ? (FAILURE_REASONS[e.attempt.reason] ?? e.attempt.reason) : 'no reason coded'}`
  if (e.type === 'reattempted' && e.attempt) return `Sent out again (attempt ${e.attempt.number})`
  return e.type.replace('_', ' ')
}

/** The temperature the custody hash recorded for the moment of the event (docs/api.md, Temperature at each handoff). */
function handoffTemperatureLine(t: NonNullable<CustodyEvent['temperature']>, tz: string): string {
  const reading = t.last_c === null ? 'no reading yet' : `${celsius(t.last_c)} (reading of ${dateTime(t.at, tz)})`
  return `Temperature at this moment: ${reading}; cold chain ${t.state}`
}

function custody(b: Bundle): HTMLElement {
  const tz = b.pharmacy.timezone
  const v = b.verdict
  const badge = v.valid
    ? h('p', { class: 'verify ok', role: 'status' }, `✓ Chain verified in this browser: ${v.length} events, RFC 8785 + SHA-256.`)
    : h(
        'p',
        { class: 'verify bad', role: 'alert' },
        '✗ Chain does NOT verify: ',
        h('a', { href: `#custody-${v.firstBadSeq}` }, `event ${v.firstBadSeq}`),
        ` — ${v.reason}.`,
      )
  const firstBad = v.valid ? null : v.firstBadSeq
  return h(
    'section',
    { class: 'custody', 'aria-labelledby': 'custody-h' },
    h('h2', { id: 'custody-h' }, 'Chain of custody'),
    badge,
    h(
      'ol',
      { class: 'timeline' },
      ...b.delivery.custody.map((e, i) =>
        h(
          'li',
          { id: `custody-${i + 1}`, class: i + 1 === firstBad ? 'bad' : undefined, tabindex: i + 1 === firstBad ? '-1' : undefined },
          h('div', { class: 'what' }, h('strong', {}, `${e.seq}. ${eventLabel(e)}`), ' ', dateTime(e.occurred_at, tz)),
          e.from || e.to ? h('div', {}, `${nameOf(b, e.from)} → ${nameOf(b, e.to)}`) : null,
          e.attempt?.note ? h('div', { class: 'small' }, `“${e.attempt.note}”`) : null,
          e.temperature ? h('div', { class: 'small handoff-temperature' }, handoffTemperatureLine(e.temperature, tz)) : null,
          h('div', { class: 'small' }, `Recorded by ${nameOf(b, e.actor.sub)}`),
          e.signature ? signatureLine(e.signature, tz) : null,
          e.evidence_hash ? h('div', { class: 'small mono' }, 'Evidence ', h('code', {}, e.evidence_hash)) : null,
          h('div', { class: 'small mono muted' }, 'Hash ', h('code', {}, e.hash)),
        ),
      ),
    ),
  )
}

/** The report sections (also the print page's). */
export function reportSections(b: Bundle, size: { width: number; fill?: boolean }, onDisposition: () => void): HTMLElement[] {
  return [
    facts(b),
    coldChainHeader(b),
    // The budget bars sit beside the chart when the page is wide enough (style.css, .trace-row).
    h(
      'div',
      { class: 'trace-row' },
      h(
        'section',
        { class: 'trace', 'aria-labelledby': 'trace-h' },
        h('h2', { id: 'trace-h' }, 'Temperature'),
        chartPanel({
          trace: b.trace,
          timeZone: b.pharmacy.timezone,
          brokenAt: b.delivery.cold_chain.broken_at,
          breakReason: b.delivery.cold_chain.break_reason,
          ...size,
          ...(b.delivery.stability ? { width: Math.max(320, Math.round(size.width * 0.62)) } : {}),
        }),
      ),
      budgetSection(b),
    ),
    summary(b),
    ...[alarmsSection(b, onDisposition), dispositionSection(b, onDisposition)].filter((s): s is HTMLElement => s !== null),
    custody(b),
  ]
}
