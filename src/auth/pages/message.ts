import type { Context } from 'hono'
import { escapeHtml, page } from './layout.js'

/**
 * An error the browser must see here rather than be redirected with: RFC 6749 §4.1.2.1 (an
 * unknown client or an unregistered redirect URI is never redirected to), and plain notices.
 */
export function messagePage(c: Context, title: string, text: string, status: 200 | 400 | 403 | 404 = 400): Response {
  return page(c, title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(text)}</p>`, status)
}
