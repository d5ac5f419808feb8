import { api, ApiError, type Alarm, type Page } from './api'
import { can } from './auth'
import { nameOf, type Bundle } from './delivery-bundle'
import { dateTime, h } from './format'

// The delivery's alarms (docs/console.md, Alarms): each excursion and break, its state, who
// acknowledged it and their note; an unacknowledged one has a form to acknowledge it with a note.

const STATE_WORDS: Record<string, string> = {
  ACTIVE_UNACK: 'Active, not acknowledged',
  ACTIVE_ACK: 'Active, acknowledged',
  CLEARED_UNACK: 'Cleared, not acknowledged',
  CLEARED_ACK: 'Cleared, acknowledged',
}
const KIND_WORDS: Record<string, string> = {
  excursion: 'Excursion',
  break: 'Break',
  sensor_gap: 'Sensor gap',
  stability: 'Stability budget',
}
/** Most urgent first: the queue shows a delivery's most urgent alarm. */
const URGENCY = ['ACTIVE_UNACK', 'CLEARED_UNACK', 'ACTIVE_ACK']

export const alarmStateWords = (state: string) => STATE_WORDS[state] ?? state

/** Pages of open alarms read per state at most: 5,000 alarms, far past what a person can work through. */
const MAX_PAGES = 50

/** The most urgent alarm state of each delivery with an alarm not yet closed (CLEARED_ACK is closed). */
export async function openAlarmStates(): Promise<Map<string, string>> {
  const byState = await Promise.all(URGENCY.map(alarmsIn))
  const worst = new Map<string, string>()
  for (const alarms of byState.reverse()) for (const a of alarms) worst.set(a.delivery_id, a.state) // more urgent states overwrite
  return worst
}

async function alarmsIn(state: string): Promise<Alarm[]> {
  const alarms: Alarm[] = []
  let cursor: string | null = null
  for (let i = 0; i < MAX_PAGES; i++) {
    const query: string = cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''
    const page: Page<Alarm> = await api<Page<Alarm>>(`/v1/alarms?state=${state}&limit=100${query}`)
    alarms.push(...page.data)
    cursor = page.next_cursor
    if (!cursor) break
  }
  return alarms
}

export function alarmsSection(b: Bundle, onDone: () => void): HTMLElement | null {
  if (b.alarms.length === 0) return null
  const tz = b.pharmacy.timezone
  return h(
    'section',
    { class: 'alarms', 'aria-labelledby': 'alarms-h' },
    h('h2', { id: 'alarms-h' }, 'Alarms'),
    h(
      'ol',
      { class: 'alarm-list' },
      ...b.alarms.map((a) =>
        h(
          'li',
          { 'data-alarm': a.id, 'data-state': a.state },
          h(
            'div',
            {},
            h('strong', {}, KIND_WORDS[a.kind] ?? a.kind),
            ` raised ${dateTime(a.raised_at, tz)} — `,
            h('span', { class: 'alarm-state' }, alarmStateWords(a.state)),
          ),
          a.cleared_at ? h('div', { class: 'small' }, `Cleared ${dateTime(a.cleared_at, tz)}`) : null,
          a.escalated_at ? h('div', { class: 'small' }, `Escalated ${dateTime(a.escalated_at, tz)}: nobody acknowledged it in time`) : null,
          a.acknowledged_at
            ? h(
                'div',
                { class: 'small' },
                `Acknowledged by ${nameOf(b, a.acknowledged_by)} at ${dateTime(a.acknowledged_at, tz)}: `,
                h('q', {}, a.note ?? ''),
              )
            : acknowledgeForm(a, onDone),
        ),
      ),
    ),
  )
}

function acknowledgeForm(a: Alarm, onDone: () => void): HTMLElement | null {
  if (!can('cold-chain:disposition'))
    return h('div', { class: 'small muted' }, 'Not acknowledged yet. Your account may not acknowledge alarms.')
  const id = `ack-${a.id}`
  const note = h('textarea', { id, name: 'note', required: true, rows: '2', maxlength: '2000' })
  const error = h('p', { class: 'error', role: 'alert' })
  const form = h(
    'form',
    { class: 'ack-form', novalidate: true },
    h('label', { for: id }, 'What you saw and did (required)'),
    note,
    h('button', { type: 'submit' }, 'Acknowledge'),
    error,
  )
  form.addEventListener('submit', (ev) => {
    ev.preventDefault()
    if (!note.value.trim()) {
      error.textContent = 'A note is required.'
      note.focus()
      return
    }
    void api(`/v1/alarms/${a.id}/acknowledge`, { method: 'POST', body: { note: note.value.trim() } }).then(onDone, (err: unknown) => {
      error.textContent = err instanceof ApiError ? `Refused: ${err.message}` : String(err)
    })
  })
  return form
}
