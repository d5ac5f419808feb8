import { api, ApiError } from './api'
import { can } from './auth'
import { nameOf, type Bundle } from './delivery-bundle'
import { dateTime, h } from './format'
import { signatureLine } from './signature'

// A decision's signature must say what the decision is: release is signed "released", return "returned".
const MEANING_OF = { release: 'released', return: 'returned' } as const

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
      d.signature
        ? signatureLine(d.signature, b.pharmacy.timezone)
        : h('p', { class: 'small muted' }, 'Recorded before decisions were signed.'),
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
  const meaning = h(
    'select',
    { id: 'disp-meaning', name: 'meaning', required: true },
    h('option', { value: '' }, 'Choose…'),
    h('option', { value: 'released' }, 'Released: I release these goods for delivery'),
    h('option', { value: 'returned' }, 'Returned: the goods come back to the pharmacy'),
  )
  // Asked again at this moment (21 CFR 11.200(a)); sent once in the request body, never stored by the page.
  const password = h('input', {
    id: 'disp-password',
    name: 'password',
    type: 'password',
    required: true,
    autocomplete: 'current-password',
    'aria-describedby': 'disp-sign-help',
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
    h(
      'fieldset',
      { class: 'sign' },
      h('legend', {}, 'Sign the decision'),
      h('label', { for: 'disp-meaning' }, 'Meaning of your signature'),
      meaning,
      h('label', { for: 'disp-password' }, 'Your password (to sign)'),
      password,
      h(
        'p',
        { id: 'disp-sign-help', class: 'small muted' },
        'Your signature is recorded with your name, the time and its meaning, and is bound to this decision.',
      ),
    ),
    h('button', { type: 'submit', class: 'primary' }, 'Sign and record decision'),
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
    if (meaning.value !== MEANING_OF[decision as keyof typeof MEANING_OF]) {
      error.textContent = `The meaning of your signature must match the decision (${MEANING_OF[decision as keyof typeof MEANING_OF]}).`
      meaning.focus()
      return
    }
    if (!password.value) {
      error.textContent = 'Enter your password to sign.'
      password.focus()
      return
    }
    const signature = { meaning: meaning.value, password: password.value }
    password.value = ''
    void api(`/v1/deliveries/${b.delivery.id}/disposition`, {
      method: 'POST',
      body: { decision, note: note.value.trim(), signature },
    }).then(onDone, (err: unknown) => {
      if (err instanceof ApiError && err.code === 'signature_failed') {
        error.textContent = 'Wrong password: nothing was signed or recorded. Enter your password again.'
        password.focus()
      } else error.textContent = err instanceof ApiError ? `Refused: ${err.message}` : String(err)
    })
  })
  section.append(form)
  return section
}
