import { randomBytes } from 'node:crypto'
import type { DeliveryStatus } from '../domain/delivery-machine.js'
import type { TrackingView } from '../services/tracking.js'

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`)

/** The status as a patient reads it: what is happening, and what to do when it is not good news. */
const statusWords: Record<DeliveryStatus, { headline: string; next?: string }> = {
  QUEUED: { headline: 'Your delivery is being prepared' },
  DISPATCHED: { headline: 'A driver will pick up your delivery soon' },
  PICKED_UP: { headline: 'Your delivery is on its way' },
  DELIVERED: { headline: 'Your delivery has arrived' },
  FAILED: { headline: 'We could not deliver today', next: 'The pharmacy will contact you to arrange another delivery.' },
  RETURNED: { headline: 'Your delivery went back to the pharmacy', next: 'Please call the pharmacy.' },
  CANCELLED: { headline: 'This delivery was cancelled', next: 'Please call the pharmacy if you have questions.' },
}

const headers = (csp: string) => ({
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  // The token is in the URL: never send it on (the tel: link, anything the browser fetches).
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-robots-tag': 'noindex, nofollow',
  'content-security-policy': csp,
})

/** "in 12 min", "in 1 h 5 min"; past the ETA, that it is running late rather than a negative time. */
function relative(etaMs: number, nowMs: number): string {
  const minutes = Math.round((etaMs - nowMs) / 60_000)
  if (minutes < 0) return 'running a little late'
  if (minutes < 1) return 'any minute now'
  if (minutes < 60) return `in about ${minutes} min`
  const h = Math.floor(minutes / 60)
  return h < 24 ? `in about ${h} h${minutes % 60 ? ` ${minutes % 60} min` : ''}` : `in about ${Math.round(h / 24)} days`
}

/** The ETA as local wall time in the pharmacy's zone, with the zone's abbreviation; the date too when it is not today there. */
function localTime(iso: string, nowIso: string, timeZone: string): string {
  const day = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: 'short', day: 'numeric' })
  const sameDay = day.format(new Date(iso)) === day.format(new Date(nowIso))
  return new Intl.DateTimeFormat('en-US', {
    timeZone,
    ...(sameDay ? {} : { weekday: 'short', month: 'short', day: 'numeric' }),
    hour: 'numeric',
    minute: '2-digit',
    timeZoneName: 'short',
  }).format(new Date(iso))
}

/**
 * The patient's tracking page (docs/api.md, Tracking links): status in plain words, the ETA,
 * the driver's first name, the PIN when there is one, the pharmacy's name and phone. No script
 * at all; CSP allows only this page's own style (by nonce) and no framing.
 */
export function trackingPage(view: TrackingView, selfUrl: string): { html: string; headers: Record<string, string> } {
  const nonce = randomBytes(16).toString('base64')
  const words = statusWords[view.status]
  const rows: string[] = []
  if (view.eta) {
    rows.push(
      `<div class="row"><dt>Expected</dt><dd id="eta">${escapeHtml(localTime(view.eta, view.now, view.timezone))} <span class="muted">(${escapeHtml(relative(Date.parse(view.eta), Date.parse(view.now)))})</span></dd></div>`,
    )
  }
  if (view.driver_first_name)
    rows.push(`<div class="row"><dt>Your driver</dt><dd id="driver">${escapeHtml(view.driver_first_name)}</dd></div>`)
  const pin = view.pin
    ? `<section class="pin" aria-labelledby="pin-label"><h2 id="pin-label">Your delivery PIN</h2><p class="digits" id="pin">${escapeHtml(view.pin)}</p><p>Tell it to the driver when your delivery arrives. Do not share it with anyone else.</p></section>`
    : ''
  const phone = view.pharmacy.phone
    ? `<p><a id="phone" href="tel:${escapeHtml(view.pharmacy.phone)}">Call ${escapeHtml(view.pharmacy.phone)}</a></p>`
    : ''
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex, nofollow">
<title>Delivery from ${escapeHtml(view.pharmacy.name)}</title>
<style nonce="${nonce}">
body{font:17px/1.5 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
main{max-width:32rem;margin:0 auto;padding:20px 16px}
.card{background:#fff;border:1px solid #d0d5dd;border-radius:12px;padding:16px 18px;margin-bottom:16px}
h1{font-size:24px;line-height:1.25;margin:0 0 8px}h2{font-size:17px;margin:0 0 4px}
.from{margin:0 0 12px;color:#344054}dl{margin:0}.row{display:flex;gap:12px;padding:6px 0;border-top:1px solid #eaecf0}
dt{min-width:7.5rem;color:#344054}dd{margin:0;font-weight:600}.muted{color:#475467;font-weight:400}
.pin{background:#eff8ff;border-color:#175cd3}.digits{font-size:36px;font-weight:700;letter-spacing:.3em;margin:4px 0;font-variant-numeric:tabular-nums}
a{color:#175cd3}a#phone{display:inline-block;padding:10px 0;font-weight:600}
footer{font-size:14px;color:#475467}
</style></head>
<body><main>
<div class="card">
<p class="from">Delivery from <strong id="pharmacy">${escapeHtml(view.pharmacy.name)}</strong></p>
<h1 id="status">${escapeHtml(words.headline)}</h1>
${words.next ? `<p>${escapeHtml(words.next)}</p>` : ''}
${rows.length ? `<dl>${rows.join('')}</dl>` : ''}
</div>
${pin ? `<div class="card pin">${pin}</div>` : ''}
<div class="card"><h2>Questions?</h2><p>${escapeHtml(view.pharmacy.name)}</p>${phone}</div>
<footer><p>Times are in the pharmacy’s time zone (${escapeHtml(view.timezone.replace(/_/g, ' '))}). <a href="${escapeHtml(selfUrl)}">Refresh</a></p></footer>
</main></body></html>`
  return {
    html,
    headers: headers(`default-src 'none'; style-src 'nonce-${nonce}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`),
  }
}

/** An altered, expired, closed or throttled link: this sentence only, naming nobody. */
export function trackingUnavailablePage(detail = 'If you are expecting a delivery, please contact your pharmacy.'): {
  html: string
  headers: Record<string, string>
} {
  const html =
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">' +
    '<meta name="robots" content="noindex, nofollow"><title>Link not available</title></head>' +
    `<body><main><h1>This tracking link is not available</h1><p>${escapeHtml(detail)}</p></main></body></html>`
  return { html, headers: headers("default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'") }
}
