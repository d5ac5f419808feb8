import { api, ApiError, type Delivery, type Party, type Pharmacy, type Prescription, type Trace } from './api'
import { can } from './auth'
import { verifyInBrowser, type Verdict } from './chain'
import { chartPanel } from './chart'
import { BREAK_REASONS, celsius, dateTime, duration, h } from './format'
import { onEvent } from './live'

// One delivery as a pharmacist reviews it: what was prescribed, the profile, status and times in
// the pharmacy's time zone, the chart, the summary, the custody timeline (verified here, in the
// browser), and the disposition. The printable report (#/print/…) reuses the same sections.

export type Bundle = {
  delivery: Delivery
  rx: Prescription
  pharmacy: Pharmacy
  parties: Map<string, Party>
  trace: Trace
  verdict: Verdict
}

const ENDING = new Set(['delivered', 'returned', 'cancelled'])
/** Buckets to ask for: fine enough to see a door opening, few enough to draw at once (the API allows 10,000). */
const TARGET_POINTS = 4_000

export async function loadBundle(id: string): Promise<Bundle> {
  const delivery = await api<Delivery>(`/v1/deliveries/${encodeURIComponent(id)}`)
  const start = Date.parse(delivery.custody.find((e) => e.type === 'dispatched')?.occurred_at ?? delivery.created_at)
  const ended = [...delivery.custody].reverse().find((e) => ENDING.has(e.type))
  const end = ended ? Date.parse(ended.occurred_at) : Date.now()
  const step = Math.max(1, Math.ceil((end - start) / 1000 / TARGET_POINTS))
  const [rx, pharmacy, parties, trace] = await Promise.all([
    api<Prescription>(`/v1/prescriptions/${delivery.rx_id}`),
    api<Pharmacy>(`/v1/pharmacies/${delivery.pharmacy_id}`),
    api<{ data: Party[] }>(`/v1/deliveries/${delivery.id}/parties`),
    api<Trace>(`/v1/deliveries/${delivery.id}/temperature?step=${step}s`),
  ])
  const verdict = await verifyInBrowser(rx, delivery.custody)
  return { delivery, rx, pharmacy, parties: new Map(parties.data.map((p) => [p.id, p])), trace, verdict }
}

const nameOf = (b: Bundle, id: string | null) => {
  if (!id) return '—'
  if (id === 'patient') return 'the patient'
  const p = b.parties.get(id)
  return p ? `${p.name} (${id})` : id
}

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
      ...row('ETA', dateTime(d.eta, tz)),
      ...(rx.deliver_by ? row('Deliver by', dateTime(rx.deliver_by, tz)) : []),
      ...row('Tote', d.tote_id ?? '—'),
    ),
  )
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
          h('div', { class: 'what' }, h('strong', {}, `${e.seq}. ${e.type.replace('_', ' ')}`), ' ', dateTime(e.occurred_at, tz)),
          e.from || e.to ? h('div', {}, `${nameOf(b, e.from)} → ${nameOf(b, e.to)}`) : null,
          h('div', { class: 'small' }, `Recorded by ${nameOf(b, e.actor.sub)}`),
          e.evidence_hash ? h('div', { class: 'small mono' }, 'Evidence ', h('code', {}, e.evidence_hash)) : null,
          h('div', { class: 'small mono muted' }, 'Hash ', h('code', {}, e.hash)),
        ),
      ),
    ),
  )
}

function dispositionSection(b: Bundle, onDone: () => void): HTMLElement | null {
  const c = b.delivery.cold_chain
  if (c.state !== 'BROKEN') return null
  const section = h('section', { class: 'disposition', 'aria-labelledby': 'disp-h' }, h('h2', { id: 'disp-h' }, 'Disposition'))
  if (c.disposition) {
    const d = c.disposition
    section.append(
      h(
        'p',
        { class: 'decided' },
        h('strong', {}, d.decision === 'release' ? 'Released' : 'Return to pharmacy'),
        ` by ${nameOf(b, d.decided_by.sub)} at ${dateTime(d.decided_at, b.pharmacy.timezone)}.`,
      ),
      h('blockquote', {}, d.note ?? ''),
    )
    return section
  }
  if (!can('cold-chain:disposition')) {
    section.append(h('p', {}, 'Waiting for a pharmacist’s decision. Your account may not record one.'))
    return section
  }
  const note = h('textarea', {
    id: 'disp-note',
    name: 'note',
    required: true,
    rows: '3',
    maxlength: '2000',
    'aria-describedby': 'disp-help',
  })
  const error = h('p', { class: 'error', role: 'alert' })
  const form = h(
    'form',
    { class: 'disp-form', novalidate: true },
    h(
      'fieldset',
      {},
      h('legend', {}, 'Decision'),
      h(
        'label',
        {},
        h('input', { type: 'radio', name: 'decision', value: 'release', required: true }),
        ' Release: the goods may be delivered',
      ),
      h('label', {}, h('input', { type: 'radio', name: 'decision', value: 'return' }), ' Return: the goods come back to the pharmacy'),
    ),
    h('label', { for: 'disp-note' }, 'Note (required)'),
    note,
    h(
      'p',
      { id: 'disp-help', class: 'small muted' },
      'Say why: stability data, product, who you consulted. The note is kept with the decision.',
    ),
    h('button', { type: 'submit' }, 'Record decision'),
    error,
  )
  form.addEventListener('submit', (ev) => {
    ev.preventDefault()
    const decision = (form.querySelector('input[name=decision]:checked') as HTMLInputElement | null)?.value
    if (!decision) {
      error.textContent = 'Choose release or return.'
      return
    }
    if (!note.value.trim()) {
      error.textContent = 'A note is required.'
      note.focus()
      return
    }
    void api(`/v1/deliveries/${b.delivery.id}/disposition`, { method: 'POST', body: { decision, note: note.value.trim() } }).then(
      onDone,
      (err: unknown) => {
        error.textContent = err instanceof ApiError ? `Refused: ${err.message}` : String(err)
      },
    )
  })
  section.append(form)
  return section
}

/** The report sections (also the print page's). */
export function reportSections(b: Bundle, width: number, onDisposition: () => void): HTMLElement[] {
  return [
    facts(b),
    coldChainHeader(b),
    h(
      'section',
      { class: 'trace', 'aria-labelledby': 'trace-h' },
      h('h2', { id: 'trace-h' }, 'Temperature'),
      chartPanel({
        trace: b.trace,
        timeZone: b.pharmacy.timezone,
        brokenAt: b.delivery.cold_chain.broken_at,
        breakReason: b.delivery.cold_chain.break_reason,
        width,
      }),
    ),
    summary(b),
    ...[dispositionSection(b, onDisposition)].filter((s): s is HTMLElement => s !== null),
    custody(b),
  ]
}

export function deliveryPage(main: HTMLElement, id: string, announce: (text: string) => void): () => void {
  let stopped = false
  const started = performance.now()
  async function load(): Promise<void> {
    try {
      const b = await loadBundle(id)
      if (stopped) return
      const width = Math.min(Math.max(main.clientWidth - 32, 320), 1100)
      main.replaceChildren(
        h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← Attention queue')),
        h('h1', {}, `Prescription ${b.rx.rx_id}`, h('span', { class: 'muted small' }, ` delivery ${b.delivery.id}`)),
        h('p', {}, h('a', { href: `#/print/${b.delivery.id}` }, 'Printable excursion report')),
        ...reportSections(b, width, () => {
          announce('Decision recorded')
          void load()
        }),
      )
      main.dataset.drawnMs = String(Math.round(performance.now() - started))
      main.dataset.ready = 'true'
    } catch (err) {
      main.replaceChildren(h('h1', {}, 'Delivery'), h('p', { role: 'alert' }, `Could not load ${id}: ${(err as Error).message}`))
    }
  }
  void load()
  let timer: ReturnType<typeof setTimeout> | null = null
  const off = onEvent((e) => {
    if (e.delivery_id !== id || timer) return
    // A decision being written is never wiped by a live update: say so, and let the reader reload.
    const form = main.querySelector<HTMLFormElement>('.disp-form')
    if (form && (form.querySelector<HTMLTextAreaElement>('textarea')!.value || form.querySelector('input:checked'))) {
      if (!main.querySelector('.changed')) {
        const reload = h('button', { type: 'button' }, 'Reload')
        reload.addEventListener('click', () => void load())
        form.before(h('p', { class: 'changed', role: 'status' }, 'This delivery changed since you opened it. ', reload))
      }
      return
    }
    timer = setTimeout(() => {
      timer = null
      void load().then(() => announce('Delivery updated'))
    }, 250)
  })
  return () => {
    stopped = true
    off()
    if (timer) clearTimeout(timer)
  }
}

/** One page per delivery, for the browser's print-to-PDF (the quality record). */
export function printPage(main: HTMLElement, ids: string[]): () => void {
  let stopped = false
  void (async () => {
    const bundles = await Promise.all(ids.map(loadBundle))
    if (stopped) return
    const printButton = h('button', { type: 'button', class: 'no-print' }, 'Print')
    printButton.addEventListener('click', () => window.print())
    main.replaceChildren(
      h('p', { class: 'no-print crumbs' }, h('a', { href: '#/' }, '← Attention queue'), ' ', printButton),
      ...bundles.map((b) =>
        h(
          'article',
          { class: 'report' },
          h('h1', {}, `Excursion report — prescription ${b.rx.rx_id}`),
          h(
            'p',
            { class: 'small' },
            `Delivery ${b.delivery.id} · ${b.pharmacy.name} · printed ${dateTime(new Date().toISOString(), b.pharmacy.timezone)}`,
          ),
          ...reportSections(b, 680, () => {}).filter((s) => !s.querySelector('form')),
        ),
      ),
    )
    main.dataset.ready = 'true'
  })().catch((err: unknown) => main.replaceChildren(h('p', { role: 'alert' }, `Could not load the report: ${(err as Error).message}`)))
  return () => {
    stopped = true
  }
}
