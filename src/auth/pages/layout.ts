import { createHash } from 'node:crypto'
import type { Context } from 'hono'

/** HTML text and attribute escaping for everything interpolated into a page. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (ch) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[ch]!)
}

/** Hidden form fields carrying values from one page to the next. */
export const hiddenFields = (fields: Record<string, string | undefined>) =>
  Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v!)}">`)
    .join('\n')

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;background:#f4f6f8;color:#1d2733;margin:0}
main{max-width:26rem;margin:8vh auto;background:#fff;padding:2rem;border-radius:.75rem;box-shadow:0 1px 4px #0002}
h1{font-size:1.35rem;margin:0 0 1rem}label{display:block;margin:.75rem 0 .25rem;font-weight:600}
input[type=email],input[type=password]{width:100%;box-sizing:border-box;padding:.6rem;border:1px solid #9aa5b1;border-radius:.4rem;font:inherit}
button{margin-top:1.25rem;padding:.6rem 1.2rem;border:0;border-radius:.4rem;background:#0a7d5a;color:#fff;font:inherit;cursor:pointer}
button.secondary{background:#e4e7eb;color:#1d2733;margin-left:.5rem}.error{background:#fde8e8;color:#8a1c1c;padding:.6rem;border-radius:.4rem}
.app{color:#52606d}ul{padding-left:1.2rem}`

const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64')

/**
 * A page with no script and only its inline style: the CSP allows nothing else. form-action
 * names this server and, on pages whose form ends in a redirect to the client, the redirect
 * URI's origin: browsers (Chrome) apply form-action to the redirect that follows a form post.
 */
const csp = (formTargets: string[]) =>
  `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; form-action 'self'${formTargets.map((t) => ` ${t}`).join('')}; frame-ancestors 'none'; base-uri 'none'`

/**
 * Headers every sign-in, consent, error and setup page carries (RFC 9700 §4.16 clickjacking,
 * §4.2.4 referrer leakage; RFC 6749 §5.1 no-store): no framing, no caching, no Referer.
 */
function pageHeaders(c: Context, formTargets: string[] = []): void {
  c.header('Content-Security-Policy', csp(formTargets))
  c.header('X-Frame-Options', 'DENY')
  c.header('Cache-Control', 'no-store')
  c.header('Pragma', 'no-cache')
  c.header('Referrer-Policy', 'no-referrer')
  c.header('X-Content-Type-Options', 'nosniff')
}

/** A whole HTML page around `body` (already escaped), with the page headers set. */
export function page(
  c: Context,
  title: string,
  body: string,
  status: 200 | 400 | 401 | 403 | 404 | 429 = 200,
  formTargets: string[] = [],
): Response {
  pageHeaders(c, formTargets)
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer"><title>${escapeHtml(title)} · rxtrace</title><style>${STYLE}</style></head>
<body><main>
${body}
</main></body></html>`
  return c.html(html, status)
}
