import { api, type Delivery, type Page } from './api'
import { BREAK_REASONS, dateTime, duration, h, km, untilEta } from './format'
import { alarmStateWords, openAlarmStates } from './alarms'
import { onEvent } from './live'

// The attention queue: BROKEN without a decision first, then EXCURSION, then the rest (the API's
// `order=attention`, an indexed keyset over the pharmacy's deliveries), filtered by status,
// cold-chain state and creation date; it reloads itself when an event arrives. Each row leads with
// what a pharmacist knows a shipment by: its items and patient, when and why it broke, the driver,
// the ETA while it is on its way, and the cold-chain figures against their limits. The page's
// prescriptions, drivers and where each driver was last seen come with the page
// (`expand=prescription,driver,last_position`), not a request per row.

type Filters = { status: string; cold_chain_state: string; created_from: string; created_to: string }
const STATUSES = ['QUEUED', 'DISPATCHED', 'PICKED_UP', 'DELIVERED', 'FAILED', 'RETURNED', 'CANCELLED']
const STATES = ['BROKEN', 'EXCURSION', 'OK', 'UNMONITORED']
const PAGE = 50

function attentionOf(d: Delivery): { rank: number; label: string } {
  if (d.cold_chain.state === 'BROKEN' && !d.cold_chain.disposition) return { rank: 0, label: 'Decision needed' }
  if (d.cold_chain.state === 'EXCURSION') return { rank: 1, label: 'Excursion' }
  if (d.cold_chain.state === 'BROKEN') return { rank: 2, label: `Decided: ${d.cold_chain.disposition!.decision}` }
  return { rank: 2, label: d.cold_chain.state === 'UNMONITORED' ? 'No cold chain' : 'OK' }
}

const OPEN = new Set(['QUEUED', 'DISPATCHED', 'PICKED_UP'])

/** "broke 2 h 05 min ago: crossed a hard limit" (or when the open excursion began). */
function whenAndWhy(d: Delivery, now: number): HTMLElement | null {
  const cc = d.cold_chain
  if (cc.state === 'BROKEN' && cc.broken_at) {
    const reason = cc.break_reason ? (BREAK_REASONS[cc.break_reason] ?? cc.break_reason) : null
    return h('span', { class: 'when' }, `broke ${ago(cc.broken_at, now)}${reason ? `: ${reason}` : ''}`)
  }
  const open = cc.state === 'EXCURSION' ? cc.excursions.find((e) => e.ended_at === null) : undefined
  return open ? h('span', { class: 'when' }, `out of range since ${ago(open.started_at, now)}`) : null
}

const ago = (iso: string, now: number) => `${duration(Math.max(0, (now - Date.parse(iso)) / 1000))} ago`

/** Where the driver of a delivery in progress was last seen: "seen 2 min ago, 1.2 km away" (the page links the map). */
function lastSeen(d: Delivery, now: number): HTMLElement | null {
  const p = d.last_position
  if (!p) return null
  return h(
    'span',
    { class: 'muted small block last-seen' },
    `seen ${ago(p.at, now)}${p.distance_m === null ? '' : `, ${km(p.distance_m)} away`}`,
  )
}

/** The items (drug name and strength, as the prescription describes them) and the patient reference. */
function shipment(d: Delivery): HTMLElement {
  const rx = d.prescription
  const items = rx?.items ?? []
  return h(
    'td',
    { class: 'shipment' },
    h(
      'a',
      { href: `#/delivery/${d.id}` },
      items.length ? items.map((i) => `${i.description}${i.quantity > 1 ? ` ×${i.quantity}` : ''}`).join('; ') : `Prescription ${d.rx_id}`,
    ),
    rx ? h('span', { class: 'muted small block' }, `Patient ${rx.patient_id}`) : null,
  )
}

/**
 * MKT and time out of range against the profile's limits: "MKT 9.12 °C — over its 8 °C limit",
 * "Out of range 42 min of 1 h 00 min allowed"; flagged in words (and colour) once over, or near (80 %).
 */
function coldChainFlags(d: Delivery): (HTMLElement | string)[] {
  const cc = d.cold_chain
  const p = cc.profile
  if (!cc.required || !p) return [h('span', { class: 'muted' }, 'No cold chain')]
  const flag = (value: number, limit: number | null, text: string, over: string) => {
    const level = limit === null ? 'none' : value > limit ? 'over' : value >= 0.8 * limit ? 'near' : 'within'
    return h(
      'span',
      { class: `flag flag-${level}`, 'data-level': level },
      text,
      level === 'over' ? h('strong', {}, ` — ${over}`) : level === 'near' ? h('strong', {}, ' — near its limit') : null,
    )
  }
  const out: HTMLElement[] = []
  if (cc.mkt_c !== null)
    out.push(
      flag(
        cc.mkt_c,
        p.mkt_max_c,
        p.mkt_max_c === null ? `MKT ${cc.mkt_c.toFixed(2)} °C` : `MKT ${cc.mkt_c.toFixed(2)} °C, limit ${p.mkt_max_c} °C`,
        'over its limit',
      ),
    )
  out.push(
    flag(
      cc.time_out_of_range_s,
      p.max_cumulative_s,
      `Out of range ${duration(cc.time_out_of_range_s)} of ${duration(p.max_cumulative_s)} allowed`,
      'over the allowance',
    ),
  )
  return out
}

/** Local midnight after `day` (YYYY-MM-DD): a calendar day is 23 or 25 hours when the clocks change, never "+ 24 h". */
function dayAfter(day: string): Date {
  const midnight = new Date(`${day}T00:00:00`)
  midnight.setDate(midnight.getDate() + 1)
  return midnight
}

function queryOf(f: Filters, cursor: string | null): string {
  const q = new URLSearchParams({ order: 'attention', limit: String(PAGE), expand: 'prescription,driver,last_position' })
  if (f.status) q.set('status', f.status)
  if (f.cold_chain_state) q.set('cold_chain_state', f.cold_chain_state)
  // Dates are the pharmacy's calendar days in the browser's zone; the API compares UTC instants.
  if (f.created_from) q.set('created_from', new Date(`${f.created_from}T00:00:00`).toISOString())
  if (f.created_to) q.set('created_to', dayAfter(f.created_to).toISOString())
  if (cursor) q.set('cursor', cursor)
  return q.toString()
}

export function queuePage(main: HTMLElement, timeZone: string, announce: (text: string) => void): () => void {
  const filters: Filters = { status: '', cold_chain_state: '', created_from: '', created_to: '' }
  let rows: Delivery[] = []
  let next: string | null = null
  let pages = 1
  const select = (name: keyof Filters, label: string, options: string[]) => {
    const el = h(
      'select',
      { id: `f-${name}`, name },
      h('option', { value: '' }, 'Any'),
      ...options.map((o) => h('option', { value: o }, o)),
    )
    el.addEventListener('change', () => {
      filters[name] = el.value
      pages = 1
      void load()
    })
    return h('div', { class: 'field' }, h('label', { for: `f-${name}` }, label), el)
  }
  const date = (name: keyof Filters, label: string) => {
    const el = h('input', { id: `f-${name}`, name, type: 'date' })
    el.addEventListener('change', () => {
      filters[name] = el.value
      pages = 1
      void load()
    })
    return h('div', { class: 'field' }, h('label', { for: `f-${name}` }, label), el)
  }
  const tbody = h('tbody')
  const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Show more')
  const status = h('p', { class: 'queue-status', role: 'status' })
  const table = h(
    'table',
    { class: 'queue' },
    h('caption', {}, 'Deliveries, most urgent first'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...['Attention', 'Items and patient', 'Cold chain', 'Driver', 'ETA', 'Status', 'Created'].map((c) => h('th', { scope: 'col' }, c)),
      ),
    ),
    tbody,
  )
  main.replaceChildren(
    h('h1', {}, 'Attention queue'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter deliveries' },
      select('status', 'Status', STATUSES),
      select('cold_chain_state', 'Cold-chain state', STATES),
      date('created_from', 'Created from'),
      date('created_to', 'Created to'),
    ),
    status,
    table,
    more,
  )
  more.addEventListener('click', () => {
    pages++
    void load(true)
  })

  let generation = 0
  let alarmStates = new Map<string, string>()
  async function load(append = false): Promise<void> {
    const mine = ++generation
    const started = performance.now()
    try {
      if (append && next) {
        const page = await api<Page<Delivery>>(`/v1/deliveries?${queryOf(filters, next)}`)
        if (mine !== generation) return
        rows = [...rows, ...page.data]
        next = page.next_cursor
      } else {
        // Reload as many pages as are shown, so a live update keeps the reader's place.
        let cursor: string | null = null
        const all: Delivery[] = []
        for (let i = 0; i < pages; i++) {
          const page: Page<Delivery> = await api<Page<Delivery>>(`/v1/deliveries?${queryOf(filters, cursor)}`)
          all.push(...page.data)
          cursor = page.next_cursor
          if (!cursor) break
        }
        if (mine !== generation) return
        rows = all
        next = cursor
      }
      // Each delivery's most urgent alarm not yet closed; the queue still shows without them.
      alarmStates = await openAlarmStates().catch(() => new Map<string, string>())
      if (mine !== generation) return
      render()
      main.dataset.loadedMs = String(Math.round(performance.now() - started))
      status.textContent = `${rows.length} deliver${rows.length === 1 ? 'y' : 'ies'} shown${next ? ', more below' : ''}.`
    } catch (err) {
      status.textContent = `Could not load the queue: ${(err as Error).message}`
    }
  }
  function render() {
    const now = Date.now()
    tbody.replaceChildren(
      ...rows.map((d) => {
        const a = attentionOf(d)
        return h(
          'tr',
          { class: `rank-${a.rank}`, 'data-delivery': d.id },
          h(
            'td',
            { class: 'attention' },
            h('span', { class: `badge badge-${d.cold_chain.state.toLowerCase()}${a.rank === 0 ? ' badge-urgent' : ''}` }, a.label),
            whenAndWhy(d, now),
            // The delivery's most urgent alarm not yet closed (docs/console.md, The attention queue).
            h(
              'span',
              { class: 'ack-slot', 'data-slot': 'alarm-acknowledgement', hidden: !alarmStates.has(d.id) },
              alarmStates.has(d.id) ? `Alarm: ${alarmStateWords(alarmStates.get(d.id)!)}` : '',
            ),
          ),
          shipment(d),
          h('td', { class: 'figures' }, ...coldChainFlags(d)),
          h(
            'td',
            { class: 'driver' },
            d.driver?.name ?? h('span', { class: 'muted' }, d.driver_id ? 'Assigned' : 'Not assigned'),
            lastSeen(d, now),
          ),
          // An ETA only while the delivery is on its way: once it ended, there is nothing to expect.
          h(
            'td',
            { class: 'eta' },
            ...(OPEN.has(d.status)
              ? [dateTime(d.eta, timeZone), h('span', { class: 'muted small eta-relative' }, untilEta(d.eta, now))]
              : []),
          ),
          h('td', { class: 'status' }, d.status),
          h('td', { class: 'created' }, dateTime(d.created_at, timeZone)),
        )
      }),
    )
    more.hidden = !next
  }
  void load()
  let timer: ReturnType<typeof setTimeout> | null = null
  const off = onEvent(() => {
    // Bursts of events (a tote's break, then its webhook echo) reload once.
    if (timer) return
    timer = setTimeout(() => {
      timer = null
      void load().then(() => announce('Queue updated'))
    }, 250)
  })
  return () => {
    off()
    if (timer) clearTimeout(timer)
    generation++
  }
}
