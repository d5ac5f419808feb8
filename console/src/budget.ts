import type { Bundle } from './delivery-bundle'
import { dateTime, duration, h } from './format'
import { signedByLine } from './signature'

// Each item's stability budget beside the chart (docs/stability.md): per band a bar of the time
// consumed against the time allowed (with assessments given back), the verdict, freeze-thaw and the
// assessments in force. Printed as it is on the excursion report: the bar's figures are in its text.

const EXHAUSTED_REASONS: Record<string, string> = {
  band_budget: 'a band’s time ran out',
  outside_bands: 'a temperature outside storage and every band',
  freeze_thaw: 'too many freeze-thaw cycles',
  hard_limit: 'crossed a hard limit',
}

type Ledger = NonNullable<Bundle['delivery']['stability']>
type Item = Ledger['items'][number]
type Band = Item['bands'][number]

function bandRow(band: Band, tz: string): HTMLElement {
  const budget = band.allowed_s + band.add_back_s
  const used = budget === 0 ? (band.consumed_s > 0 ? 1 : 0) : Math.min(1, band.consumed_s / budget)
  const percent = Math.round(used * 100)
  const label = `${band.min_c} to ${band.max_c} °C`
  // Set through the CSSOM: the console's Content-Security-Policy refuses inline style attributes.
  const fill = h('span', { class: 'bar-fill' })
  fill.style.width = `${percent}%`
  const text = `${duration(band.consumed_s)} used of ${duration(budget)}${band.add_back_s ? ` (${duration(band.add_back_s)} given back)` : ''}, ${duration(band.remaining_s)} left`
  return h(
    'li',
    { class: 'band' },
    h('span', { class: 'band-label' }, label),
    h(
      'span',
      {
        class: `bar${used >= 1 ? ' bar-out' : used > 0.8 ? ' bar-low' : ''}`,
        role: 'meter',
        'aria-label': `${label}: budget used`,
        'aria-valuemin': '0',
        'aria-valuemax': '100',
        'aria-valuenow': String(percent),
        'aria-valuetext': text,
      },
      fill,
    ),
    h('span', { class: 'band-text small' }, text),
    ...band.assessments.map((a) =>
      h(
        'div',
        { class: 'assessment small', 'data-assessment': a.id },
        `Assessment ${a.id}: +${duration(a.add_back_s)} — ${a.justification}.`,
        a.signed_by ? signedByLine(a.signed_by, tz) : ' Not signed.',
      ),
    ),
  )
}

function itemPanel(item: Item, b: Bundle): HTMLElement {
  const tz = b.pharmacy.timezone
  const name = b.rx.items?.find((i) => i.ndc && i.ndc.replace(/-/g, '').padStart(11, '0') === item.ndc.replace(/-/g, ''))?.description
  const verdict =
    item.verdict === 'within'
      ? h('span', { class: 'badge badge-ok' }, 'Within budget')
      : h(
          'span',
          { class: 'badge badge-broken' },
          `Exhausted ${dateTime(item.exhausted_at, tz)}: ${EXHAUSTED_REASONS[item.exhausted_reason ?? ''] ?? item.exhausted_reason}`,
        )
  return h(
    'div',
    { class: 'budget-item', 'data-ndc': item.ndc },
    h('h3', {}, name ?? `NDC ${item.ndc}`, h('span', { class: 'muted small' }, ` NDC ${item.ndc} · stability v${item.version}`)),
    verdict,
    h('ul', { class: 'bands' }, ...item.bands.map((band) => bandRow(band, tz))),
    h(
      'p',
      { class: 'small' },
      `Freeze-thaw cycles: ${item.freeze_thaw.count}${item.freeze_thaw.max === null ? ' (not counted)' : ` of ${item.freeze_thaw.max} allowed`}`,
    ),
  )
}

/** The stability budget section; null when no item names a product. */
export function budgetSection(b: Bundle): HTMLElement | null {
  const ledger = b.delivery.stability
  if (!ledger || ledger.items.length === 0) return null
  return h(
    'section',
    { class: 'budget', 'aria-labelledby': 'budget-h' },
    h('h2', { id: 'budget-h' }, 'Stability budget'),
    h(
      'p',
      { class: 'small' },
      `Smallest share left: ${Math.round(ledger.remaining_fraction * 1000) / 10} %`,
      ledger.legs.length > 1 ? ` · leg ${ledger.legs.length} of ${ledger.legs.length} (earlier legs counted)` : '',
    ),
    ...ledger.items.map((item) => itemPanel(item, b)),
  )
}
