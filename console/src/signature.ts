import type { StoredSignature } from '../../src/domain/custody-event'
import { dateTime, h } from './format'

// How a signed record shows its signature to a person (21 CFR 11.50): the signer's printed
// name, the date and time in the pharmacy's zone (with the zone's name), and what it means.

const MEANINGS: Record<StoredSignature['meaning'], string> = {
  released: 'Released',
  returned: 'Returned',
  assessed: 'Assessed',
  approved: 'Approved',
  handed_over: 'Handed over',
}

const meaningLabel = (meaning: StoredSignature['meaning']) => MEANINGS[meaning]

/** "Signed by Pat Pharmacist (pat@…) on Mar 04, 2031, 03:10:00 AM CST — meaning: Returned". */
export function signatureLine(s: StoredSignature, timeZone: string): HTMLElement {
  return h(
    'p',
    { class: 'signature', 'data-signature': s.id },
    'Signed by ',
    h('strong', { class: 'signer' }, s.name),
    ` (${s.email}) on `,
    h('time', { datetime: s.signed_at }, dateTime(s.signed_at, timeZone)),
    ' — meaning: ',
    h('strong', { class: 'meaning' }, meaningLabel(s.meaning)),
    s.method === 'password' ? ' (password entered to sign)' : ' (signed within 5 minutes of signing in)',
  )
}

/** The shorter line where only the name, time and meaning are at hand (an assessment on the stability ledger). */
export function signedByLine(s: { name: string; signed_at: string; meaning: string }, timeZone: string): HTMLElement {
  return h(
    'span',
    { class: 'signature' },
    ' Signed by ',
    h('strong', { class: 'signer' }, s.name),
    ' on ',
    h('time', { datetime: s.signed_at }, dateTime(s.signed_at, timeZone)),
    ' — meaning: ',
    h('strong', { class: 'meaning' }, MEANINGS[s.meaning as StoredSignature['meaning']] ?? s.meaning),
  )
}
