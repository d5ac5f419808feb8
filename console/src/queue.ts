import { api, type Delivery, type Page } from './api'
import { dateTime, h } from './format'
import { onEvent } from './live'

// The attention queue: BROKEN without a decision first, then EXCURSION, then the rest (the API's
// `order=attention`, an indexed keyset over the pharmacy's deliveries), filtered by status,
// cold-chain state and creation date; it reloads itself when an event arrives.

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

/** Local midnight after `day` (YYYY-MM-DD): a calendar day is 23 or 25 hours when the clocks change, never "+ 24 h". */
function dayAfter(day: string): Date {
  const midnight = new Date(`${day}T00:00:00`)
  midnight.setDate(midnight.getDate() + 1)
  return midnight
}

function queryOf(f: Filters, cursor: string | null): string {
  const q = new URLSearchParams({ order: 'attention', limit: String(PAGE) })
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
      h('tr', {}, ...['Attention', 'Delivery', 'Status', 'Cold chain', 'Created', 'ETA'].map((c) => h('th', { scope: 'col' }, c))),
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
      render()
      main.dataset.loadedMs = String(Math.round(performance.now() - started))
      status.textContent = `${rows.length} deliver${rows.length === 1 ? 'y' : 'ies'} shown${next ? ', more below' : ''}.`
    } catch (err) {
      status.textContent = `Could not load the queue: ${(err as Error).message}`
    }
  }
  function render() {
    tbody.replaceChildren(
      ...rows.map((d) => {
        const a = attentionOf(d)
        return h(
          'tr',
          { class: `rank-${a.rank}`, 'data-delivery': d.id },
          h(
            'td',
            {},
            h('span', { class: `badge badge-${d.cold_chain.state.toLowerCase()}${a.rank === 0 ? ' badge-urgent' : ''}` }, a.label),
          ),
          h('td', {}, h('a', { href: `#/delivery/${d.id}` }, d.rx_id), h('span', { class: 'muted small' }, ` ${d.id}`)),
          h('td', {}, d.status),
          h('td', {}, d.cold_chain.state),
          h('td', {}, dateTime(d.created_at, timeZone)),
          h('td', {}, dateTime(d.eta, timeZone)),
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
