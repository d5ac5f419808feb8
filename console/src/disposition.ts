import { api, ApiError } from './api'
import { can } from './auth'
import { nameOf, type Bundle } from './delivery-bundle'
import { dateTime, h } from './format'

/**
 * The pharmacist's decision on a broken cold chain: the decision once recorded, or the form to
 * record it (for an account that may); null while the cold chain holds.
 */
export function dispositionSection(b: Bundle, onDone: () => void): HTMLElement | null {
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
    h('button', { type: 'submit', class: 'primary' }, 'Record decision'),
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
