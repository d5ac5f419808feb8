import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Hono } from 'hono'
import type { AppEnv } from '../env.js'

/**
 * The pharmacist console (docs/console.md) at /console: the files Vite built into
 * console/dist, read once at start. Every answer carries a CSP that allows only this origin
 * (no inline script, no third party, no framing), so a script injected through data it shows
 * could neither run nor send anything elsewhere. The page keeps its tokens in memory only.
 */

export const CONSOLE_DIST = fileURLToPath(new URL('../../../console/dist/', import.meta.url))

// CSP Level 3. uPlot sizes its canvas through element.style (CSSOM), which style-src does not govern.
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ')

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
}

function readDist(dir: string): Map<string, Buffer> {
  const files = new Map<string, Buffer>()
  if (!existsSync(join(dir, 'index.html'))) return files
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue
    const path = join(entry.parentPath, entry.name)
    files.set(path.slice(dir.length).replaceAll('\\', '/'), readFileSync(path))
  }
  return files
}

const MISSING = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>rxtrace console</title></head>
<body><main><h1>The console is not built</h1><p>Run <code>npm run build:console</code> (or <code>npm ci</code>, which builds it), then restart the service.</p></main></body></html>`

export function consoleRoutes(dir = CONSOLE_DIST) {
  const files = readDist(dir)
  const app = new Hono<AppEnv>()
  const headers = (type: string, immutable: boolean) => ({
    'content-type': type,
    'content-security-policy': CONSOLE_CSP,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    // Vite names assets by content hash; the page itself must be re-read to pick up a new build.
    'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
  })
  const page = (c: { body: (b: Uint8Array | string, s: 200 | 503, h: Record<string, string>) => Response }) => {
    const index = files.get('index.html')
    return index
      ? c.body(new Uint8Array(index), 200, headers(TYPES['.html']!, false))
      : c.body(MISSING, 503, headers(TYPES['.html']!, false))
  }
  app.get('/console', (c) => c.redirect('/console/', 301))
  app.get('/console/', (c) => page(c))
  app.get('/console/*', (c) => {
    const name = c.req.path.slice('/console/'.length)
    const body = files.get(name)
    if (body)
      return c.body(new Uint8Array(body), 200, headers(TYPES[extname(name)] ?? 'application/octet-stream', name.startsWith('assets/')))
    if (name.startsWith('assets/')) return c.notFound()
    return page(c) // a deep link such as /console/print: the page routes itself
  })
  return app
}
