import './style.css'
import { api, type Pharmacy } from './api'
import { auditPage } from './audit'
import { can, current, ensureSignedIn } from './auth'
import { deliveryPage, printPage } from './delivery'
import { h } from './format'
import { queuePage } from './queue'

// Routes live in the hash (#/, #/delivery/dl_…, #/print/dl_…[,dl_…], #/audit) so the sign-in redirect
// URI is the one fixed /console/ the console's client registers.

const main = document.getElementById('main')!
const liveRegion = document.getElementById('live-status')!
const announce = (text: string) => {
  liveRegion.textContent = text
}
let timeZone = 'UTC'
let stop: () => void = () => {}

function route(): void {
  stop()
  const [, page, arg] = location.hash.split('/')
  if (page === 'delivery' && arg) stop = deliveryPage(main, decodeURIComponent(arg), announce)
  else if (page === 'print' && arg) stop = printPage(main, decodeURIComponent(arg).split(','))
  else if (page === 'audit') stop = auditPage(main, timeZone)
  else stop = queuePage(main, timeZone, announce)
  // Keyboard and screen-reader users land on the new content, as on a page load.
  main.focus({ preventScroll: true })
}

async function start(): Promise<void> {
  const back = await ensureSignedIn()
  const session = current()!
  if (session.pharmacyId) {
    const pharmacy = await api<Pharmacy>(`/v1/pharmacies/${session.pharmacyId}`).catch(() => null)
    if (pharmacy) timeZone = pharmacy.timezone
    document.getElementById('who')!.textContent = pharmacy ? `${pharmacy.name}` : ''
  }
  document.getElementById('signout')!.hidden = false
  document.getElementById('nav-audit')!.hidden = !can('audit:read')
  if (location.hash !== back) history.replaceState(null, '', `/console/${back}`)
  window.addEventListener('hashchange', route)
  route()
}

start().catch((err: unknown) => {
  main.replaceChildren(
    h('h1', {}, 'rxtrace console'),
    h('p', { role: 'alert' }, (err as Error).message),
    h('p', {}, h('a', { href: '/console/' }, 'Try again')),
  )
})
