import { OpenAPIHono } from '@hono/zod-openapi'
import type { EmbedTokens } from '../../auth/embed-tokens.js'
import { AppError } from '../../errors.js'
import type { FleetDashboardService } from '../../services/fleet-dashboard.js'
import type { Branding } from '../../services/fleets.js'
import { fromJson, type Db } from '../../store/schema.js'
import { dashboardPage, embedErrorPage } from '../embed-page.js'
import type { AppEnv } from '../env.js'
import { problem, publicRoute, z } from '../openapi.js'
import { LiveView } from './fleet-dashboard.js'

// A signed embed token is a few hundred bytes; anything far longer is not one.
const MAX_TOKEN_CHARS = 4_096

const EmbedQuery = z.object({
  token: z.string().optional().describe('The token of the URL an embed session answered'),
})

/**
 * The embedded dashboard (docs/fleet.md, Embedding the dashboard): the page and its data,
 * authorised by the embed session's token alone, read-only and for that one fleet.
 */
export function embedRoutes(deps: { db: Db; dashboards: FleetDashboardService; embedTokens: EmbedTokens }) {
  const app = new OpenAPIHono<AppEnv>()
  /** The fleet the URL's token names, if it is intact, unexpired and the fleet still exists. */
  const fleetOf = async (token: string | undefined) => {
    if (!token || token.length > MAX_TOKEN_CHARS) return null
    const fleetId = await deps.embedTokens.verify(token)
    if (!fleetId) return null
    return (
      (await deps.db
        .selectFrom('fleets')
        .select(['id', 'name', 'branding', 'embed_origins'])
        .where('id', '=', fleetId)
        .executeTakeFirst()) ?? null
    )
  }

  app.openapi(
    publicRoute({
      method: 'get',
      path: '/embed/dashboard',
      tags: ['Fleet money'],
      operationId: 'embeddedFleetDashboard',
      summary: "The fleet's dashboard page, for an iframe",
      description:
        "Served with CSP `frame-ancestors` set to the fleet's `embed_origins`. An expired or altered URL gets 401 and an error page, nothing else.",
      request: { query: EmbedQuery },
      responses: {
        200: {
          description: 'The page',
          content: { 'text/html': { schema: z.string(), example: '<!doctype html><html lang="en">…</html>' } },
        },
        401: {
          description: 'The error page',
          content: {
            'text/html': {
              schema: z.string(),
              example: '<!doctype html><html lang="en">…This dashboard link has expired or is not valid…</html>',
            },
          },
        },
      },
    }),
    async (c) => {
      const token = c.req.valid('query').token
      const fleet = await fleetOf(token)
      if (!fleet) {
        const page = embedErrorPage()
        return c.body(page.html, 401, page.headers)
      }
      const page = dashboardPage({
        token: token!,
        name: fleet.name,
        branding: fromJson<Branding>(fleet.branding),
        embedOrigins: fromJson<string[]>(fleet.embed_origins),
        view: await deps.dashboards.liveView(fleet.id),
      })
      return c.body(page.html, 200, page.headers)
    },
  )

  app.openapi(
    publicRoute({
      method: 'get',
      path: '/embed/dashboard/data',
      tags: ['Fleet money'],
      operationId: 'embeddedFleetDashboardData',
      summary: 'The live view behind the embedded page',
      description: 'What the page refreshes from, with the same token: deliveries and exceptions, no payouts.',
      request: { query: EmbedQuery },
      responses: {
        200: { description: 'The live view', content: { 'application/json': { schema: LiveView } } },
        401: problem('`unauthorized`: the embed session has expired or its token is not valid; the page shows that instead of the data'),
      },
    }),
    async (c) => {
      c.header('cache-control', 'no-store')
      c.header('referrer-policy', 'no-referrer')
      const fleet = await fleetOf(c.req.valid('query').token)
      if (!fleet) throw new AppError('unauthorized', 'The embed session has expired or is not valid.')
      return c.json(await deps.dashboards.liveView(fleet.id), 200)
    },
  )
  return app
}
