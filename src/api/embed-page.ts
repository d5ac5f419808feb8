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
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:4px 8px;border-bottom:1px solid #ddd}
.counts span{display:inline-block;margin-right:12px}.bad{color:#b42318;font-weight:600}#stale{color:#b42318}
</style></head>
<body>
<header>${logo}<h1>${escapeHtml(title)}</h1></header>
<main>
<p id="stale" hidden></p>
<section><h2>Deliveries</h2><div class="counts" id="counts"></div></section>
<section><h2>Open exceptions (<span id="exceptions-count"></span>)</h2><table><thead><tr><th>Delivery</th><th>Exception</th><th>Since</th></tr></thead><tbody id="exceptions"></tbody></table></section>
<section><h2>In progress (<span id="progress-count"></span>)</h2><table><thead><tr><th>Delivery</th><th>Status</th><th>Driver</th><th>ETA</th><th>Cold chain</th></tr></thead><tbody id="progress"></tbody></table></section>
<p><small>Updated <span id="generated"></span></small></p>
</main>
<script type="application/json" id="initial" nonce="${nonce}">${scriptJson(input.view)}</script>
<script nonce="${nonce}">
(() => {
  const token = ${scriptJson(input.token)};
  const $ = (id) => document.getElementById(id);
  const row = (cells, bad) => { const tr = document.createElement('tr'); for (const c of cells) { const td = document.createElement('td'); td.textContent = c ?? '—'; tr.append(td) } if (bad) tr.className = 'bad'; return tr };
  const labels = { cold_chain_excursion: 'Temperature excursion', cold_chain_break: 'Cold chain broken', failed: 'Delivery failed' };
  function draw(view) {
    $('counts').replaceChildren(...Object.entries(view.counts).map(([status, n]) => { const s = document.createElement('span'); s.textContent = status + ': ' + n; return s }));
    $('exceptions-count').textContent = view.open_exceptions.count;
    $('exceptions').replaceChildren(...view.open_exceptions.items.map((e) => row([e.delivery_id, labels[e.kind] ?? e.kind, e.since], true)));
    $('progress-count').textContent = view.in_progress.count;
    $('progress').replaceChildren(...view.in_progress.items.map((d) => row([d.delivery_id, d.status, d.driver_id, d.eta, d.cold_chain.required ? d.cold_chain.state : '—'], d.cold_chain.state === 'EXCURSION' || d.cold_chain.state === 'BROKEN')));
    $('generated').textContent = view.generated_at;
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
