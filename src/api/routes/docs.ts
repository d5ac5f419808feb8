import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { Hono } from 'hono'
import type { AppEnv } from '../env.js'

const assets = ['swagger-ui.css', 'swagger-ui-bundle.js', 'swagger-ui-standalone-preset.js'] as const
const contentTypes: Record<string, string> = { css: 'text/css; charset=utf-8', js: 'text/javascript; charset=utf-8' }

const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rxtrace API v1</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css"></head>
<body><div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
<script src="/docs/assets/init.js"></script></body></html>`

const init = `window.ui = SwaggerUIBundle({ url: '/v1/openapi.json', dom_id: '#ui', presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'StandaloneLayout' })`

/** The API reference at /docs, rendered by Swagger UI from local files (no CDN). */
export function docsRoutes() {
  const dist = join(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'), '..')
  const files = new Map<string, string>(assets.map((name) => [name, readFileSync(join(dist, name), 'utf8')]))
  files.set('init.js', init)
  const app = new Hono<AppEnv>()
  app.get('/docs', (c) => c.html(page))
  app.get('/docs/assets/:name', (c) => {
    const name = c.req.param('name')
    const body = files.get(name)
    if (body === undefined) return c.notFound()
    return c.body(body, 200, { 'content-type': contentTypes[name.split('.').pop()!]!, 'cache-control': 'public, max-age=86400' })
  })
  return app
}
