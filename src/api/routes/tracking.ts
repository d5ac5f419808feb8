import { OpenAPIHono } from '@hono/zod-openapi'
import type { TrackingTokens } from '../../auth/tracking-tokens.js'
import type { TrackingService } from '../../services/tracking.js'
import type { AppEnv } from '../env.js'
import type { BucketStore, Limit } from '../middleware/bucket-store.js'
import { callerAddress } from '../middleware/caller-address.js'
import { idParam, json, publicRoute, v1Route, z } from '../openapi.js'
import { trackingPage, trackingUnavailablePage } from '../tracking-page.js'

// A signed tracking token is a few hundred bytes; anything far longer is not one.
const MAX_TOKEN_CHARS = 4_096

const TrackingLink = z
  .object({
    url: z.string().describe("The patient's page: send it to the patient only; it shows the delivery's PIN"),
    expires_at: z
      .string()
      .describe('When the link stops working at the latest: 7 days after it was issued, or 24 h after the delivery ended if sooner'),
  })
  .openapi('TrackingLink', {
    example: {
      url: 'https://rxtrace.example.com/track?token=eyJhbGciOiJFUzI1NiIsInR5cCI6InJ4dHJhY2UtdHJhY2srand0In0…',
      expires_at: '2026-11-30T18:00:00.000Z',
    },
  })

const TrackQuery = z.object({ token: z.string().optional().describe('The token of the URL a tracking link answered') })

export type TrackingLimits = { perAddress: { rps: number; burst: number }; perLink: { rps: number; burst: number }; trustProxy: boolean }

/**
 * `POST /v1/deliveries/{id}/tracking-links` and the patient's page at `/track` (docs/api.md,
 * Tracking links). The page is authorised by its token alone and throttled per caller address
 * (before its signature is checked) and per link.
 */
export function trackingRoutes(deps: { tracking: TrackingService; tokens: TrackingTokens; buckets: BucketStore; limits: TrackingLimits }) {
  const app = new OpenAPIHono<AppEnv>()
  const perAddress: Limit = { name: 'tracking-address', ...deps.limits.perAddress }
  const perLink: Limit = { name: 'tracking-link', ...deps.limits.perLink }

  app.openapi(
    v1Route('deliveries:write', {
      method: 'post',
      path: '/v1/deliveries/{id}/tracking-links',
      operationId: 'createTrackingLink',
      tags: ['Deliveries'],
      summary: "A signed link to the patient's tracking page",
      description:
        "The page shows the status in plain words, the ETA in the pharmacy's time zone, the driver's first name, the PIN when the delivery requires one, and the pharmacy's name and phone; nothing else. The delivery's pharmacy (or an unrestricted client) only. Nothing is stored: the URL carries its own signature and expiry. With the pharmacy's `patient_notify`, the same URL is also sent as a `patient.notify` event (`link_issued`). 409 `tracking_closed` when the delivery ended more than 24 h ago.",
      request: { params: idParam('dl') },
      responses: { 201: json(TrackingLink, 'The tracking link') },
    }),
    async (c) => c.json(await deps.tracking.issue(c.get('principal'), c.req.valid('param').id), 201),
  )

  const html = (description: string, example: string) => ({
    description,
    content: { 'text/html': { schema: z.string(), example } },
  })
  const unavailable = '<!doctype html><html lang="en">…This tracking link is not available…</html>'
  app.openapi(
    publicRoute({
      method: 'get',
      path: '/track',
      tags: ['Deliveries'],
      operationId: 'patientTrackingPage',
      summary: "The patient's tracking page",
      description:
        'A page for a phone, with no script. An altered or unknown link is 404, an expired one (or one whose delivery ended more than 24 h ago) 410, and too many requests 429 with Retry-After; each shows the same neutral sentence and nothing else.',
      request: { query: TrackQuery },
      responses: {
        200: html('The page', '<!doctype html><html lang="en">…Your delivery is on its way…</html>'),
        404: html('An altered or unknown link', unavailable),
        410: html('An expired link', unavailable),
        429: html('Too many requests from this address or for this link', unavailable),
      },
    }),
    async (c) => {
      const refused = (status: 404 | 410 | 429, headers: Record<string, string> = {}) => {
        const page = trackingUnavailablePage(status === 429 ? 'Too many requests. Please try again in a minute.' : undefined)
        return c.body(page.html, status, { ...page.headers, ...headers })
      }
      const retry = (s: number) => ({ 'retry-after': String(s) })
      // Per address first, before any signature is checked: made-up tokens cost the caller, not the service.
      const [byAddress] = await deps.buckets.spend([{ limit: perAddress, key: callerAddress(c, deps.limits.trustProxy) }])
      if (!byAddress!.ok) return refused(429, retry(byAddress!.retryAfterS))
      const token = c.req.valid('query').token
      if (!token || token.length > MAX_TOKEN_CHARS) return refused(404)
      const verdict = await deps.tokens.verify(token)
      if (!verdict.ok) return refused(verdict.reason === 'expired' ? 410 : 404)
      const [byLink] = await deps.buckets.spend([{ limit: perLink, key: verdict.claims.linkId }])
      if (!byLink!.ok) return refused(429, retry(byLink!.retryAfterS))
      const shown = await deps.tracking.view(verdict.claims)
      if (!shown.ok) return refused(shown.reason === 'expired' ? 410 : 404)
      const page = trackingPage(shown.view, `/track?token=${encodeURIComponent(token)}`)
      return c.body(page.html, 200, page.headers)
    },
  )
  return app
}
