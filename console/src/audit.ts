import { accessToken, signIn } from './auth'
import { api, type Page } from './api'
import { dateTime, h } from './format'

// The audit review: the pharmacy's trail of requests (the API shows a pharmacist their own
// pharmacy's records only), filtered by person, delivery, operation and time, paged, and
// exported as the API's CSV with the same filters.

type AuditRecord = {
  at: string
  sub: string | null
  client_id: string | null
  action?: string
  method: string
  path: string
  status: number
  delivery_id?: string
  request_id: string
  hash: string
}
type Filters = { user: string; delivery_id: string; action: string; from: string; to: string }
const PAGE = 50
/** The operations a pharmacist's trail usually holds; any operationId may be typed. */
const ACTIONS = [
  'createPrescription',
  'dispatchDelivery',
  'pickUpDelivery',
  'handOffDelivery',
  'completeDelivery',
  'failDelivery',
  'returnDelivery',
  'cancelDelivery',
  'decideDisposition',
  'getDelivery',
  'listDeliveries',
  'listAuditEvents',
]

function queryOf(f: Filters, cursor: string | null): URLSearchParams {
  const q = new URLSearchParams({ limit: String(PAGE) })
  if (f.user) q.set('user', f.user)
  if (f.delivery_id) q.set('delivery_id', f.delivery_id)
  if (f.action) q.set('action', f.action)
  // datetime-local is the browser's wall-clock time; the API compares UTC instants.
  if (f.from) q.set('from', new Date(f.from).toISOString())
  if (f.to) q.set('to', new Date(f.to).toISOString())
  if (cursor) q.set('cursor', cursor)
  return q
}

export function auditPage(main: HTMLElement, timeZone: string): () => void {
  const filters: Filters = { user: '', delivery_id: '', action: '', from: '', to: '' }
  let rows: AuditRecord[] = []
  let next: string | null = null
  const input = (name: keyof Filters, label: string, type: string, extra: Record<string, string> = {}) => {
    const el = h('input', { id: `a-${name}`, name, type, ...extra })
    el.addEventListener('change', () => {
      filters[name] = el.value.trim()
      void load()
    })
    return h('div', { class: 'field' }, h('label', { for: `a-${name}` }, label), el)
  }
  const actions = h('datalist', { id: 'a-actions' }, ...ACTIONS.map((a) => h('option', { value: a })))
  const tbody = h('tbody')
  const more = h('button', { type: 'button', class: 'more', hidden: true }, 'Show more')
  const exportButton = h('button', { type: 'button' }, 'Export CSV')
  const status = h('p', { class: 'queue-status', role: 'status' })
  main.replaceChildren(
    h('h1', {}, 'Audit trail'),
    h(
      'form',
      { class: 'filters', role: 'search', 'aria-label': 'Filter audit records' },
      input('user', 'User (id)', 'text', { placeholder: 'us_…' }),
      input('delivery_id', 'Delivery', 'text', { placeholder: 'dl_…' }),
      input('action', 'Action', 'text', { list: 'a-actions' }),
      actions,
      input('from', 'From', 'datetime-local', { step: '1' }),
      input('to', 'To (before)', 'datetime-local', { step: '1' }),
      h('div', { class: 'field' }, exportButton),
    ),
    status,
    h(
      'table',
      { class: 'queue audit' },
      h('caption', {}, 'Requests, oldest first'),
      h('thead', {}, h('tr', {}, ...['Time', 'User', 'Action', 'Request', 'Status', 'Delivery'].map((c) => h('th', { scope: 'col' }, c)))),
      tbody,
    ),
    more,
  )
  more.addEventListener('click', () => void load(true))
  exportButton.addEventListener('click', () => void exportCsv())

  let generation = 0
  async function load(append = false): Promise<void> {
    const mine = ++generation
    try {
      const page = await api<Page<AuditRecord>>(`/v1/audit-events?${queryOf(filters, append ? next : null)}`)
      if (mine !== generation) return
      rows = append ? [...rows, ...page.data] : page.data
      next = page.next_cursor
      render()
      status.textContent = `${rows.length} record${rows.length === 1 ? '' : 's'} shown${next ? ', more below' : ''}.`
    } catch (err) {
      status.textContent = `Could not load the audit trail: ${(err as Error).message}`
    }
  }

  /** The API's CSV of every record the filters select, saved as a file (the token cannot ride on a plain link). */
  async function exportCsv(): Promise<void> {
    const q = queryOf(filters, null)
    q.delete('limit')
    const res = await fetch(`/v1/audit-events?${q}`, { headers: { authorization: `Bearer ${await accessToken()}`, accept: 'text/csv' } })
    if (res.status === 401) return signIn()
    if (!res.ok) {
      status.textContent = `Could not export: ${res.status}`
      return
    }
    const url = URL.createObjectURL(await res.blob())
    const link = h('a', { href: url, download: 'audit-trail.csv', hidden: true })
    document.body.append(link)
    link.click()
    link.remove()
    setTimeout(() => URL.revokeObjectURL(url), 10_000)
    status.textContent = 'Exported the records the filters select as CSV.'
  }

  function render() {
    tbody.replaceChildren(
      ...rows.map((r) =>
        h(
          'tr',
          { 'data-request': r.request_id },
          h('td', {}, dateTime(r.at, timeZone)),
          h('td', {}, r.sub ?? '—'),
          h('td', {}, r.action ?? '—'),
          h('td', {}, h('code', {}, `${r.method} ${r.path}`)),
          h('td', {}, String(r.status)),
          h('td', {}, r.delivery_id ? h('a', { href: `#/delivery/${r.delivery_id}` }, r.delivery_id) : '—'),
        ),
      ),
    )
    more.hidden = !next
  }
  void load()
  return () => {
    generation++
  }
}
