import { randomBytes } from 'node:crypto'
import type { Branding } from '../services/fleets.js'
import type { LiveView } from '../services/fleet-dashboard.js'

// The page asks for fresh data this often; an embed session lasts at most 10 minutes.
const REFRESH_MS = 15_000

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`)
// Inside <script type="application/json">: only `<` could end the element early.
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, '\\u003c')

const COMMON_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  // The token is in the URL: never send it on as a Referer (the logo, a link).
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
}

/**
 * The dashboard page for an iframe: the fleet's branding, its live deliveries and exceptions
 * (first drawn from the data inlined here, then refreshed from `/embed/dashboard/data` with the
 * same token). CSP: only this page's own script and style (by nonce), images over https (the
 * logo), requests to this origin, and framing by the fleet's `embed_origins` only.
 */
export function dashboardPage(input: { token: string; name: string; branding: Branding; embedOrigins: string[]; view: LiveView }): {
  html: string
  headers: Record<string, string>
} {
  const nonce = randomBytes(16).toString('base64')
  const title = input.branding.display_name ?? input.name
  const color = input.branding.primary_color ?? '#1f6feb' // validated as #rrggbb when stored
  const ancestors = input.embedOrigins.length ? input.embedOrigins.join(' ') : "'none'"
  const csp = [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    'img-src https:',
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${ancestors}`,
  ].join('; ')
  const logo = input.branding.logo_url ? `<img class="logo" src="${escapeHtml(input.branding.logo_url)}" alt="">` : ''
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style nonce="${nonce}">
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24}
header{display:flex;align-items:center;gap:12px;padding:12px 16px;background:${color};color:#fff}
header h1{font-size:18px;margin:0}.logo{height:32px}
main{padding:12px 16px}section{margin-bottom:16px}h2{font-size:15px;margin:8px 0}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #ddd;vertical-align:top}
.counts span{display:inline-block;margin-right:12px}#stale{color:#b42318}
.muted{color:#4b5563;font-size:12px;display:block}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-weight:600;white-space:nowrap;border:1px solid}
.st-broken,.st-failed{background:#fee4e2;color:#912018;border-color:#912018}
.st-excursion{background:#fef0c7;color:#7a2e0e;border-color:#7a2e0e}
.st-ok{background:#d1fadf;color:#05603a;border-color:#05603a}
.st-none{background:#f2f4f7;color:#344054;border-color:#667085}
tr.row-broken td:first-child,tr.row-failed td:first-child{box-shadow:inset 4px 0 #912018}
tr.row-excursion td:first-child{box-shadow:inset 4px 0 #b54708}
</style></head>
<body>
<header>${logo}<h1>${escapeHtml(title)}</h1></header>
<main>
<p id="stale" hidden></p>
<section><h2>Deliveries</h2><div class="counts" id="counts"></div></section>
<section><h2>Open exceptions (<span id="exceptions-count"></span>)</h2><table><thead><tr><th>Exception</th><th>Since</th><th>Pharmacy</th><th>Driver</th><th>Carrying</th></tr></thead><tbody id="exceptions"></tbody></table></section>
<section><h2>In progress (<span id="progress-count"></span>)</h2><table><thead><tr><th>Cold chain</th><th>Pharmacy</th><th>Driver</th><th>Status</th><th>ETA</th><th>Carrying</th></tr></thead><tbody id="progress"></tbody></table></section>
<p><small>Updated <span id="generated"></span> · times in <span id="zone"></span></small></p>
</main>
<script type="application/json" id="initial" nonce="${nonce}">${scriptJson(input.view)}</script>
<script nonce="${nonce}">
(() => {
  const token = ${scriptJson(input.token)};
  const $ = (id) => document.getElementById(id);
  // A cell: text, or [text, muted second line]; a badge: state text with a symbol, so colour is never the only cue.
  const cell = (content) => {
    const td = document.createElement('td');
    if (content instanceof Node) td.append(content);
    else if (Array.isArray(content)) { td.append(content[0] ?? '—'); const m = document.createElement('span'); m.className = 'muted'; m.textContent = content[1]; td.append(m) }
    else td.textContent = content ?? '—';
    return td;
  };
  const row = (cells, state) => { const tr = document.createElement('tr'); tr.append(...cells.map(cell)); if (state) tr.className = 'row-' + state; return tr };
  // What the delivery carries, by name; its id below, small, for a call to the pharmacy.
  const carrying = (d) => [d.items.length ? d.items.join(', ') : '—', d.delivery_id];
  const badge = (state, text) => { const b = document.createElement('span'); b.className = 'badge st-' + state; b.textContent = text; return b };
  const exceptionBadge = { cold_chain_break: ['broken', '✕ Cold chain broken'], cold_chain_excursion: ['excursion', '⚠ Temperature excursion'], failed: ['failed', '✕ Delivery failed'] };
  const began = { cold_chain_break: 'broken', cold_chain_excursion: 'excursion began', failed: 'failed' };
  const coldChainBadge = { BROKEN: ['broken', '✕ Broken'], EXCURSION: ['excursion', '⚠ Excursion'], OK: ['ok', '✓ OK'], UNMONITORED: ['none', 'Not monitored'] };
  const statusText = { QUEUED: 'Queued', DISPATCHED: 'Dispatched', PICKED_UP: 'Picked up', DELIVERED: 'Delivered', FAILED: 'Failed', RETURNED: 'Returned', CANCELLED: 'Cancelled' };
  // "12 min ago", against the data's own time (generated_at), so the page and the data agree.
  const span = (ms) => {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min';
    const h = Math.floor(m / 60);
    return h < 48 ? h + ' h ' + (m % 60) + ' min' : Math.floor(h / 24) + ' days';
  };
  const age = (iso, now) => span(now - Date.parse(iso));
  const ahead = (iso, now) => { const d = Date.parse(iso) - now; return d >= 0 ? 'in ' + span(d) : span(-d) + ' late' };
  const km = (m) => (m < 1000 ? Math.round(m / 10) * 10 + ' m' : (m / 1000).toFixed(1) + ' km');
  // The driver, and where they were last seen: how long ago, how far from the address, and a link to the coordinates (no map is loaded here).
  const driverCell = (d, now) => {
    if (!d.last_position) return d.driver_name;
    const p = d.last_position;
    const wrap = document.createElement('span');
    wrap.append(d.driver_name ?? '—');
    const seen = document.createElement('span'); seen.className = 'muted position';
    seen.append('seen ' + age(p.at, now) + ' ago' + (p.distance_m === null ? '' : ', ' + km(p.distance_m) + ' away') + ' · ');
    const link = document.createElement('a');
    link.href = 'https://www.openstreetmap.org/?mlat=' + p.lat + '&mlon=' + p.lng + '#map=17/' + p.lat + '/' + p.lng;
    link.target = '_blank'; link.rel = 'noopener noreferrer';
    link.textContent = p.lat.toFixed(5) + ', ' + p.lng.toFixed(5);
    link.setAttribute('aria-label', 'Last position of ' + (d.driver_name ?? 'the driver') + ' on a map (opens a new tab)');
    seen.append(link); wrap.append(seen);
    return wrap;
  };
  function draw(view) {
    const now = Date.parse(view.generated_at);
    const local = new Intl.DateTimeFormat(undefined, { timeZone: view.timezone, month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZoneName: 'short' });
    const at = (iso) => local.format(new Date(iso));
    $('counts').replaceChildren(...Object.entries(view.counts).map(([status, n]) => { const s = document.createElement('span'); s.textContent = (statusText[status] ?? status) + ': ' + n; return s }));
    $('exceptions-count').textContent = view.open_exceptions.count;
    $('exceptions').replaceChildren(...view.open_exceptions.items.map((e) => {
      const [state, text] = exceptionBadge[e.kind] ?? ['none', e.kind];
      return row([badge(state, text), [began[e.kind] + ' ' + age(e.since, now) + ' ago', at(e.since)], e.pharmacy_name, e.driver_name, carrying(e)], state);
    }));
    $('progress-count').textContent = view.in_progress.count;
    $('progress').replaceChildren(...view.in_progress.items.map((d) => {
      const [state, text] = d.cold_chain.required ? coldChainBadge[d.cold_chain.state] ?? ['none', d.cold_chain.state] : ['none', 'Not required'];
      return row([badge(state, text), d.pharmacy_name, driverCell(d, now), statusText[d.status] ?? d.status, [at(d.eta), ahead(d.eta, now)], carrying(d)], state === 'ok' || state === 'none' ? null : state);
    }));
    $('generated').textContent = at(view.generated_at);
    $('zone').textContent = view.timezone;
  }
  draw(JSON.parse($('initial').textContent));
  const timer = setInterval(async () => {
    try {
      const res = await fetch('/embed/dashboard/data?token=' + encodeURIComponent(token), { cache: 'no-store' });
      if (res.status === 401) { clearInterval(timer); document.querySelector('main').replaceChildren(Object.assign(document.createElement('p'), { textContent: 'This dashboard link has expired.' })); return }
      if (!res.ok) throw new Error(String(res.status));
      draw(await res.json()); $('stale').hidden = true;
    } catch { $('stale').hidden = false; $('stale').textContent = 'Could not refresh; showing the last data.' }
  }, ${REFRESH_MS});
})();
</script>
</body></html>`
  return { html, headers: { ...COMMON_HEADERS, 'content-security-policy': csp } }
}

/**
 * What an expired, altered or unknown URL gets: this text and nothing else (no fleet name, no
 * data, no script). Framable anywhere, so the page that embeds it shows the message rather than
 * the browser's own refusal; with nothing on it there is nothing to click-jack.
 */
export function embedErrorPage(): { html: string; headers: Record<string, string> } {
  const html =
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Link expired</title></head>' +
    '<body><p>This dashboard link has expired or is not valid. Ask for a new one.</p></body></html>'
  return {
    html,
    headers: { ...COMMON_HEADERS, 'content-security-policy': "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors *" },
  }
}
