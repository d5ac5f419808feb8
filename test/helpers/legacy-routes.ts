import { createRoute, OpenAPIHono } from '@hono/zod-openapi'
import type { AppEnv } from '../../src/api/env.js'
import { idParam, json, v1Route, z } from '../../src/api/openapi.js'

/** A deprecated route declared the way a route group declares one (no route is deprecated today). */
const legacyDeprecation = {
  since: '2026-06-01T00:00:00Z',
  sunset: '2027-01-01T00:00:00Z',
  successor: '/v1/deliveries/{id}',
  notice: 'https://rxtrace.dev/changes/legacy-deliveries',
}

/** Mount with `service.app.route('/', legacyRoutes())` before the service's first request. */
export function legacyRoutes() {
  const app = new OpenAPIHono<AppEnv>()
  app.openapi(
    v1Route('deliveries:read', {
      method: 'get',
      path: '/v1/legacy-deliveries/{id}',
      operationId: 'getLegacyDelivery',
      summary: 'Read a delivery the old way',
      request: { params: idParam('dl') },
      responses: { 200: json(z.object({ id: z.string() }), 'The delivery, in short') },
      deprecation: legacyDeprecation,
    }),
    (c) => c.json({ id: c.req.valid('param').id }, 200),
  )
  // Declared without our helpers: it still gets the answers every operation can give.
  app.openapi(
    createRoute({
      method: 'get',
      path: '/v1/plain-route',
      operationId: 'getPlainRoute',
      summary: 'A route declared with createRoute alone',
      responses: { 200: json(z.object({ ok: z.boolean() }), 'OK') },
    }),
    (c) => c.json({ ok: true }, 200),
  )
  return app
}
